//! A check's outcome: the [`Verdict`] (an intent or a rejection naming its gate) and the
//! status of every gate that ran. Only this crate's gates make an accepted one.

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use crate::code::Code;
use crate::intent::Intent;
use crate::rejection::{Gate, Location, Rejection};

/// How far a check got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GateStatus {
    /// The gate ran and passed.
    Passed,
    /// The gate ran and failed.
    Failed,
    /// The gate does not apply to this contract or input.
    NotApplicable,
    /// The gate applies but was explicitly skipped (evidence without a store).
    Skipped,
}

/// The outcome of checking one output: an intent, or a rejection naming its gate.
///
/// An accepted tool request comes only out of the gates ([`Contract::check`] or
/// [`judge_calls`](crate::judge_calls), which runs the declared tools' schema gate first).
/// Anyone may record a rejection, or accept an intent that makes no call, but a tool
/// request cannot be assembled by hand:
///
/// ```compile_fail
/// use proviso_contract::{Intent, Verdict};
/// let request = Intent::ToolRequest { calls: Vec::new(), rationale: None };
/// let verdict = Verdict::from_parts(Vec::new(), Ok(request));
/// ```
///
/// ```compile_fail
/// use proviso_contract::{Intent, Verdict};
/// let request = Intent::ToolRequest { calls: Vec::new(), rationale: None };
/// let verdict = Verdict { outcome: Ok(request), gates: Vec::new() };
/// ```
///
/// and [`Progress::without_calls`] turns one into a rejection:
///
/// ```
/// use proviso_contract::{Code, Intent, IntentClass, Progress, ToolCall};
/// let call = ToolCall::new(None, "drop_table".into(), Default::default(), IntentClass::Mutate);
/// let request = Intent::ToolRequest { calls: vec![call], rationale: None };
/// let verdict = Progress::new().without_calls(request);
/// assert!(!verdict.accepted());
/// assert_eq!(verdict.rejection().unwrap().code(), &Code::UnsupportedIntent);
/// ```
#[derive(Debug, Clone)]
pub struct Verdict {
    outcome: Result<Intent, Rejection>,
    gates: Vec<(Gate, GateStatus)>,
}

impl Verdict {
    /// Whether every gate passed.
    #[must_use]
    pub fn accepted(&self) -> bool {
        self.outcome.is_ok()
    }

    /// The intent, when accepted.
    #[must_use]
    pub fn intent(&self) -> Option<&Intent> {
        self.outcome.as_ref().ok()
    }

    /// The rejection, when rejected.
    #[must_use]
    pub fn rejection(&self) -> Option<&Rejection> {
        self.outcome.as_ref().err()
    }

    /// Each gate and how it went, in order.
    #[must_use]
    pub fn gates(&self) -> &[(Gate, GateStatus)] {
        &self.gates
    }

    /// The outcome as a `Result`.
    pub fn into_result(self) -> Result<Intent, Rejection> {
        self.outcome
    }

    /// The failed gate (`None` when accepted).
    #[must_use]
    pub fn gate(&self) -> Option<Gate> {
        self.rejection().map(Rejection::gate)
    }

    /// The rejection's code (`None` when accepted).
    #[must_use]
    pub fn code(&self) -> Option<&Code> {
        self.rejection().map(Rejection::code)
    }
}

impl Serialize for Verdict {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("accepted", &self.accepted())?;
        map.serialize_entry("gate", &self.gate())?;
        // On the wire an accepted verdict's code reads `accepted`, as it always has.
        map.serialize_entry("code", self.code().map_or("accepted", Code::as_str))?;
        match &self.outcome {
            Ok(intent) => {
                map.serialize_entry("message", &format!("accepted as {}", intent.kind()))?;
                map.serialize_entry("intent", intent)?;
            }
            Err(rejection) => {
                map.serialize_entry("message", rejection.message())?;
                map.serialize_entry("next_step", &rejection.next_step())?;
                let location = rejection.location();
                if location != &Location::default() {
                    map.serialize_entry("location", location)?;
                }
                if let Some(refusal) = rejection.refusal() {
                    map.serialize_entry("refusal", refusal)?;
                }
                if !rejection.violations().is_empty() {
                    map.serialize_entry("violations", rejection.violations())?;
                }
            }
        }
        map.serialize_entry("gates", &OrderedGates(&self.gates))?;
        map.end()
    }
}

/// Serializes the gate list as an object in pipeline order.
struct OrderedGates<'a>(&'a [(Gate, GateStatus)]);

impl Serialize for OrderedGates<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (gate, status) in self.0 {
            map.serialize_entry(gate.as_str(), status)?;
        }
        map.end()
    }
}

/// The gates of the contract pipeline, in order.
const PIPELINE: [Gate; 5] = [
    Gate::Transport,
    Gate::Parse,
    Gate::Schema,
    Gate::Application,
    Gate::Evidence,
];

/// The gates a check has run so far, in order. Every pipeline over the gates (the
/// contract's [`Contract::check`](crate::Contract::check), the tool gate, the harness's own
/// application rules) records each gate here and ends with one of its endings, so every
/// verdict's gate list is built the same way:
///
/// * [`Progress::reject`]: the first gate that failed, marked failed;
/// * [`Progress::without_calls`]: a step that makes no call, accepted;
/// * an accepted tool request, made only by the schema gate
///   ([`judge_calls`](crate::judge_calls)).
#[derive(Debug, Clone, Default)]
pub struct Progress {
    gates: Vec<(Gate, GateStatus)>,
}

impl Progress {
    /// No gate has run yet.
    #[must_use]
    pub fn new() -> Self {
        Self {
            gates: Vec::with_capacity(PIPELINE.len() + 3),
        }
    }

    /// The gates of `verdict` up to (not including) `gate`: for a pipeline that judges a
    /// verdict again from that gate on (the harness refusing a repeated call).
    #[must_use]
    pub fn before(verdict: &Verdict, gate: Gate) -> Self {
        Self {
            gates: verdict
                .gates()
                .iter()
                .take_while(|(g, _)| *g != gate)
                .copied()
                .collect(),
        }
    }

    /// Records how `gate` went.
    pub fn mark(&mut self, gate: Gate, status: GateStatus) {
        self.gates.push((gate, status));
    }

    /// Records that `gate` passed.
    pub fn pass(&mut self, gate: Gate) {
        self.mark(gate, GateStatus::Passed);
    }

    /// The gates recorded so far.
    #[must_use]
    pub fn gates(&self) -> &[(Gate, GateStatus)] {
        &self.gates
    }

    /// Ends the check with `rejection`; its gate is marked failed unless it already is.
    #[must_use]
    pub fn reject(mut self, rejection: Rejection) -> Verdict {
        if !self
            .gates
            .iter()
            .any(|(g, s)| *g == rejection.gate() && *s == GateStatus::Failed)
        {
            self.mark(rejection.gate(), GateStatus::Failed);
        }
        Verdict {
            outcome: Err(rejection),
            gates: self.gates,
        }
    }

    /// Accepts a step that makes no call (a final answer, a clarification, a plan update,
    /// an abort) once the gates recorded passed it. A tool request is refused here
    /// (`unsupported_intent`): it is accepted only through the schema gate of
    /// [`judge_calls`](crate::judge_calls).
    #[must_use]
    pub fn without_calls(self, intent: Intent) -> Verdict {
        if matches!(intent, Intent::ToolRequest { .. }) {
            return self.reject(Rejection::new(
                Gate::Application,
                Code::UnsupportedIntent,
                "a tool request is accepted only through the declared tools' schema gate",
                Location::default(),
            ));
        }
        self.accept(intent)
    }

    /// An accepted verdict; only the gates of this crate make one with a tool request.
    pub(crate) fn accept(self, intent: Intent) -> Verdict {
        Verdict {
            outcome: Ok(intent),
            gates: self.gates,
        }
    }
}
