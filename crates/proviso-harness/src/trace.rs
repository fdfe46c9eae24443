//! The JSON Lines record of a run. Raw model output and the parsed intent are separate
//! records (`model_output` and `intent`/`rejection`), so what the model wrote and what the
//! gates made of it can be audited apart.

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::agent::{Event, Observer};

/// Writes one JSON object per line for every event. A write error is kept and reported by
/// [`JsonlTrace::finish`], never allowed to disturb the run.
#[derive(Debug)]
pub struct JsonlTrace<W: Write> {
    out: W,
    run: String,
    error: Option<std::io::Error>,
}

impl<W: Write> JsonlTrace<W> {
    /// A trace written to `out`; `run` identifies the run in every record.
    pub fn new(out: W, run: impl Into<String>) -> Self {
        Self {
            out,
            run: run.into(),
            error: None,
        }
    }

    fn write(&mut self, mut record: Value) {
        if self.error.is_some() {
            return;
        }
        record["run"] = json!(self.run);
        record["ts_ms"] = json!(SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis()));
        let line = record.to_string();
        if let Err(e) = writeln!(self.out, "{line}").and_then(|()| self.out.flush()) {
            self.error = Some(e);
        }
    }

    /// Returns the writer, or the first write error.
    ///
    /// # Errors
    ///
    /// The first I/O error met while writing.
    pub fn finish(self) -> std::io::Result<W> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.out),
        }
    }
}

impl<W: Write> Observer for JsonlTrace<W> {
    fn event(&mut self, event: &Event<'_>) {
        let record = match event {
            Event::Started {
                question,
                format,
                tools,
            } => {
                json!({"record": "run_start", "question": question, "format": format, "tools": tools})
            }
            Event::ModelOutput {
                step,
                proposed,
                duration,
            } => json!({"record": "model_output", "step": step, "raw": proposed.text,
                "finish_reason": proposed.finish.as_str(), "input_tokens": proposed.input_tokens,
                "output_tokens": proposed.output_tokens, "duration_ms": duration.as_millis()}),
            Event::Verdict { step, verdict } => {
                let kind = if verdict.accepted() {
                    "intent"
                } else {
                    "rejection"
                };
                json!({"record": kind, "step": step, "verdict": verdict})
            }
            Event::AnswerVerdict { step, verdict } => {
                let kind = if verdict.accepted() {
                    "answer_accepted"
                } else {
                    "answer_rejection"
                };
                json!({"record": kind, "step": step, "verdict": verdict})
            }
            Event::ToolResult { step, executed } => json!({"record": "tool_result", "step": step,
                "call": executed.call, "outcome": executed.outcome, "duration_ms": executed.duration_ms}),
            Event::StepPlanned { step, plan } => {
                json!({"record": "step_plan", "step": step, "plan": plan})
            }
            Event::Finished { report } => json!({"record": "run_end", "report": report}),
        };
        self.write(record);
    }
}
