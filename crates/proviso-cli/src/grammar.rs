//! `proviso grammar`: a contract's or a tool registry's grammar in another stack's dialect.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use proviso::tools::export::{export_schema, export_tools, Dialect};
use proviso::tools::{CallFormat, GrammarOptions, Registry, ToolChoice};

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("source").args(["schema", "tools"]).required(true)))]
pub(crate) struct GrammarArgs {
    /// A JSON Schema (the contract's output).
    #[arg(long, value_name = "S.json")]
    schema: Option<PathBuf>,
    /// A tool registry (OpenAI `tools` or a BFCL function list): the grammar of one step.
    #[arg(long, value_name = "T.json")]
    tools: Option<PathBuf>,
    /// With --tools: the call format.
    #[arg(long, default_value = "hermes", requires = "tools")]
    format: CallFormat,
    /// With --tools: `auto`, `required`, `none`, or a tool name.
    #[arg(long, default_value = "required", requires = "tools")]
    choice: String,
    /// With --tools: most calls in one step.
    #[arg(long, default_value_t = 1, requires = "tools")]
    max_calls: usize,
    /// The dialect: gbnf (llama.cpp's `grammar` field), lark (llguidance-based servers), or
    /// json-schema (vLLM structured outputs, OpenAI strict mode).
    #[arg(long)]
    to: Dialect,
    /// Also require OpenAI strict mode's rules (every property required,
    /// `additionalProperties: false`, no unsupported keyword).
    #[arg(long)]
    strict: bool,
}

pub(crate) fn run(args: &GrammarArgs) -> Result<ExitCode> {
    let to_gbnf = |schema: &serde_json::Value| {
        proviso::llama::Model::json_schema_to_gbnf(schema)
            .map_err(|e| proviso::tools::export::GbnfError::new(e.to_string()))
    };
    let text = match (&args.schema, &args.tools) {
        (Some(path), _) => {
            let schema = crate::read_schema(path)?;
            export_schema(&schema, args.to, args.strict, &to_gbnf)
                .with_context(|| format!("exporting {}", path.display()))?
        }
        (None, Some(path)) => {
            let registry = Registry::from_json(&crate::read_schema(path)?)
                .with_context(|| format!("in {}", path.display()))?;
            let choice = match args.choice.as_str() {
                "auto" => ToolChoice::Auto,
                "required" => ToolChoice::Required,
                "none" => ToolChoice::None,
                name => ToolChoice::Named(name.to_owned()),
            };
            let options = GrammarOptions::default()
                .choice(choice)
                .max_calls(args.max_calls.max(1));
            export_tools(
                &registry,
                args.format,
                &options,
                args.to,
                args.strict,
                &to_gbnf,
            )
            .with_context(|| format!("exporting {}", path.display()))?
        }
        (None, None) => anyhow::bail!("pass --schema or --tools"),
    };
    let mut stdout = std::io::stdout().lock();
    write!(stdout, "{text}")?;
    if !text.ends_with('\n') {
        writeln!(stdout)?;
    }
    Ok(ExitCode::SUCCESS)
}
