//! The one kind of call a tool runner accepts.

use std::ops::Deref;

use proviso_contract::ToolCall;

/// A call that passed the tool gates, as [`ToolGate::admit`](crate::ToolGate::admit) made
/// it: a declared tool of the declared intent class, arguments valid under its schema and
/// argument policies, a tool the caller's role may call.
///
/// Only the gate constructs one, so a runner that takes `&GatedCall` (the harness's
/// `Toolbox::execute`) can never run a fabricated call: a [`ToolCall`] or an accepted
/// `Verdict` anyone can assemble is not enough.
///
/// ```
/// use std::sync::Arc;
/// use proviso_contract::{IntentClass, ToolCall};
/// use proviso_tools::{CallFormat, Policy, Registry, ToolGate, ToolSpec};
/// use serde_json::json;
///
/// let registry = Registry::new(vec![ToolSpec::new(
///     "get_arm",
///     "Reads one arm of a trial.",
///     IntentClass::Read,
///     json!({"type": "object", "properties": {"trial_id": {"type": "string"}},
///            "required": ["trial_id"], "additionalProperties": false}),
/// )])
/// .unwrap();
/// let gate = ToolGate::new(Arc::new(registry), CallFormat::Hermes, Policy::default());
/// let arguments = json!({"trial_id": "NCT04123456"}).as_object().unwrap().clone();
/// let call = ToolCall::new(None, "get_arm".into(), arguments, IntentClass::Read);
/// assert!(gate.admit(&call).is_ok());
/// let invented = ToolCall::new(None, "drop_table".into(), Default::default(), IntentClass::Read);
/// assert!(gate.admit(&invented).is_err());
/// ```
///
/// A caller cannot make one by hand:
///
/// ```compile_fail
/// use proviso_contract::{IntentClass, ToolCall};
/// let call = ToolCall::new(None, "drop_table".into(), Default::default(), IntentClass::Mutate);
/// let gated = proviso_tools::GatedCall { call };
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct GatedCall {
    call: ToolCall,
}

impl GatedCall {
    /// Wraps a call the gates just passed; nothing outside this crate may.
    pub(crate) fn new(call: ToolCall) -> Self {
        Self { call }
    }

    /// The call.
    #[must_use]
    pub fn call(&self) -> &ToolCall {
        &self.call
    }
}

impl Deref for GatedCall {
    type Target = ToolCall;

    fn deref(&self) -> &ToolCall {
        &self.call
    }
}
