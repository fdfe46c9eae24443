//! What the real-model test binaries of this crate share: one model per binary, and a
//! greedy proposer over it.

use std::sync::OnceLock;

use proviso::decode::{CompileOptions, Sampling};
use proviso::llama::RunOptions;
use proviso::{LocalModel, LocalProposer};

/// The default model, opened once per test binary.
pub(crate) fn local() -> &'static LocalModel {
    static LOCAL: OnceLock<LocalModel> = OnceLock::new();
    LOCAL.get_or_init(|| {
        LocalModel::open(None, &mut |event| eprintln!("{event:?}")).expect("the default model")
    })
}

/// A greedy proposer over the default model, on an engine of its own.
#[allow(dead_code)] // Not every binary runs agents.
pub(crate) fn proposer() -> LocalProposer<'static> {
    let local = local();
    let engine = local.engine(RunOptions::default()).unwrap();
    LocalProposer::new(local, engine, Sampling::greedy(), CompileOptions::default())
}
