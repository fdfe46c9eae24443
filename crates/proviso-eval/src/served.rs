//! What the runners that measure the server share: they send each case to the server's
//! backend as a client would, and read the choices it returns.

use proviso::server::{Delta, Sink};

/// A sink that keeps nothing: a runner reads the returned choices, not the stream.
pub(crate) struct Quiet;

impl Sink for Quiet {
    fn send(&mut self, _choice: u32, _delta: Delta) -> bool {
        true
    }

    fn cancelled(&self) -> bool {
        false
    }
}
