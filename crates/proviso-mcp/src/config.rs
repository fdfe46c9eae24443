//! The `mcpServers` configuration, in the JSON format that Claude Desktop, Cursor and
//! llama.cpp read:
//!
//! ```json
//! {"mcpServers": {
//!   "fs":   {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv/docs"]},
//!   "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}},
//!   "web":  {"url": "https://example.invalid/mcp", "headers": {"Authorization": "Bearer …"}}
//! }}
//! ```
//!
//! A server is a child process (`command`, `args`, `env`, `cwd`), started without a shell so
//! that nothing in an argument is interpolated, or a streamable HTTP endpoint (`url`,
//! `headers`). A key proviso does not know is refused by name rather than ignored.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::McpError;

/// Every configured server, by name.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct McpConfig {
    /// The servers, by the name that prefixes their tools.
    pub servers: BTreeMap<String, ServerConfig>,
}

/// One server.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ServerConfig {
    /// How to reach it.
    pub transport: Transport,
    /// The longest one request (initialize, list, call) may take.
    pub timeout: Duration,
}

/// How a server is reached.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Transport {
    /// A child process speaking MCP on its standard input and output.
    Stdio {
        /// The program (looked up on `PATH`), run without a shell.
        command: String,
        /// Its arguments, passed as they are.
        args: Vec<String>,
        /// Variables added to the inherited environment.
        env: BTreeMap<String, String>,
        /// The working directory, when given.
        cwd: Option<PathBuf>,
    },
    /// A streamable HTTP endpoint.
    Http {
        /// The endpoint.
        url: String,
        /// Headers sent with every request (an `Authorization` header among them).
        headers: BTreeMap<String, String>,
    },
}

/// How long one request may take when the configuration does not say.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

const STDIO_KEYS: &[&str] = &["command", "args", "env", "cwd"];
const HTTP_KEYS: &[&str] = &["url", "headers"];
const COMMON_KEYS: &[&str] = &["type", "transport", "timeout", "disabled", "description"];

impl McpConfig {
    /// Reads a configuration file.
    ///
    /// # Errors
    ///
    /// [`McpError::Config`] naming the file and what is wrong in it.
    pub fn load(path: &Path) -> Result<Self, McpError> {
        let text = std::fs::read_to_string(path).map_err(|e| McpError::Config {
            message: format!("cannot read {}: {e}", path.display()),
        })?;
        let document: Value = serde_json::from_str(&text).map_err(|e| McpError::Config {
            message: format!("{} is not JSON: {e}", path.display()),
        })?;
        Self::from_json(&document).map_err(|e| match e {
            McpError::Config { message } => McpError::Config {
                message: format!("{}: {message}", path.display()),
            },
            other => other,
        })
    }

    /// Reads a configuration document: `{"mcpServers": {name: server}}`.
    ///
    /// # Errors
    ///
    /// [`McpError::Config`] naming the server and key.
    pub fn from_json(document: &Value) -> Result<Self, McpError> {
        let bad = |message: String| McpError::Config { message };
        let Some(root) = document.as_object() else {
            return Err(bad("the configuration must be a JSON object".into()));
        };
        let servers = match (root.get("mcpServers"), root.get("servers")) {
            (Some(servers), _) | (None, Some(servers)) => servers,
            (None, None) => {
                return Err(bad(
                    "the configuration has no `mcpServers` object (`{\"mcpServers\": {\"name\": {\"command\": …}}}`)"
                        .into(),
                ))
            }
        };
        let Some(servers) = servers.as_object() else {
            return Err(bad(
                "`mcpServers` must be an object of servers by name".into()
            ));
        };
        let mut config = Self::default();
        for (name, server) in servers {
            if !valid_server_name(name) {
                return Err(bad(format!(
                    "server name {name:?} cannot prefix tool names: use letters, digits, `_` or `-`, at most 32 bytes"
                )));
            }
            let Some(server) = server.as_object() else {
                return Err(bad(format!("server `{name}` must be an object")));
            };
            if server.get("disabled").and_then(Value::as_bool) == Some(true) {
                continue;
            }
            let field = |key: &str| format!("server `{name}`: `{key}`");
            for key in server.keys() {
                let known = STDIO_KEYS.contains(&key.as_str())
                    || HTTP_KEYS.contains(&key.as_str())
                    || COMMON_KEYS.contains(&key.as_str());
                if !known {
                    return Err(bad(format!("{} is not a key proviso knows (known: command, args, env, cwd, url, headers, type, timeout, disabled)", field(key))));
                }
            }
            let kind = server
                .get("type")
                .or_else(|| server.get("transport"))
                .map(|t| {
                    t.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| bad(format!("{} must be a string", field("type"))))
                })
                .transpose()?;
            let strings = |key: &str| -> Result<BTreeMap<String, String>, McpError> {
                match server.get(key) {
                    None => Ok(BTreeMap::new()),
                    Some(Value::Object(map)) => map
                        .iter()
                        .map(|(k, v)| {
                            v.as_str()
                                .map(|v| (k.clone(), v.to_owned()))
                                .ok_or_else(|| {
                                    bad(format!("{} values must be strings", field(key)))
                                })
                        })
                        .collect(),
                    Some(_) => Err(bad(format!("{} must be an object of strings", field(key)))),
                }
            };
            let transport = match (server.get("command"), server.get("url")) {
                (Some(_), Some(_)) => {
                    return Err(bad(format!(
                        "server `{name}` has both `command` and `url`; give one"
                    )))
                }
                (Some(command), None) => {
                    if let Some(kind) = kind.as_deref().filter(|k| *k != "stdio") {
                        return Err(bad(format!(
                            "server `{name}` has a `command` but type `{kind}`"
                        )));
                    }
                    let command = command
                        .as_str()
                        .filter(|c| !c.trim().is_empty())
                        .ok_or_else(|| {
                            bad(format!("{} must be a non-empty string", field("command")))
                        })?
                        .to_owned();
                    let args = match server.get("args") {
                        None => Vec::new(),
                        Some(Value::Array(items)) => items
                            .iter()
                            .map(|a| {
                                a.as_str().map(str::to_owned).ok_or_else(|| {
                                    bad(format!("{} must be an array of strings", field("args")))
                                })
                            })
                            .collect::<Result<_, _>>()?,
                        Some(_) => {
                            return Err(bad(format!(
                                "{} must be an array of strings",
                                field("args")
                            )))
                        }
                    };
                    for key in HTTP_KEYS {
                        if server.contains_key(*key) {
                            return Err(bad(format!("{} belongs to an HTTP server", field(key))));
                        }
                    }
                    let cwd = match server.get("cwd") {
                        None => None,
                        Some(Value::String(dir)) => Some(PathBuf::from(dir)),
                        Some(_) => return Err(bad(format!("{} must be a string", field("cwd")))),
                    };
                    Transport::Stdio {
                        command,
                        args,
                        env: strings("env")?,
                        cwd,
                    }
                }
                (None, Some(url)) => {
                    if let Some(kind) = kind.as_deref().filter(|k| {
                        !matches!(
                            *k,
                            "http" | "streamable-http" | "streamableHttp" | "streamable_http"
                        )
                    }) {
                        return Err(bad(format!(
                            "server `{name}`: type `{kind}` is not supported; proviso speaks stdio and streamable HTTP (the older SSE transport is not supported)"
                        )));
                    }
                    let url = url
                        .as_str()
                        .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
                        .ok_or_else(|| {
                            bad(format!(
                                "{} must be an http:// or https:// URL",
                                field("url")
                            ))
                        })?
                        .to_owned();
                    for key in ["args", "env", "cwd"] {
                        if server.contains_key(key) {
                            return Err(bad(format!("{} belongs to a stdio server", field(key))));
                        }
                    }
                    let headers = strings("headers")?;
                    for (key, value) in &headers {
                        if http::HeaderName::from_bytes(key.as_bytes()).is_err()
                            || http::HeaderValue::from_str(value).is_err()
                        {
                            return Err(bad(format!(
                                "{}: `{key}` is not a valid header",
                                field("headers")
                            )));
                        }
                    }
                    Transport::Http { url, headers }
                }
                (None, None) => {
                    return Err(bad(format!(
                        "server `{name}` needs a `command` (stdio) or a `url` (streamable HTTP)"
                    )))
                }
            };
            let timeout = match server.get("timeout") {
                None => DEFAULT_TIMEOUT,
                Some(t) => t
                    .as_u64()
                    .filter(|ms| (1..=3_600_000).contains(ms))
                    .map(Duration::from_millis)
                    .ok_or_else(|| {
                        bad(format!(
                            "{} must be milliseconds between 1 and 3600000",
                            field("timeout")
                        ))
                    })?,
            };
            config
                .servers
                .insert(name.clone(), ServerConfig { transport, timeout });
        }
        Ok(config)
    }
}

/// A server name usable as a tool-name prefix (`name__tool` stays a valid tool name).
fn valid_server_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        && !name.contains("__")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_both_transports() {
        let config = McpConfig::from_json(&json!({"mcpServers": {
            "fs": {"command": "node", "args": ["server.js", "/tmp/a b"], "env": {"X": "1"}},
            "web": {"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer t"}, "timeout": 500},
            "off": {"command": "x", "disabled": true}
        }}))
        .unwrap();
        assert_eq!(config.servers.len(), 2);
        match &config.servers["fs"].transport {
            Transport::Stdio {
                command, args, env, ..
            } => {
                assert_eq!(command, "node");
                assert_eq!(args[1], "/tmp/a b");
                assert_eq!(env["X"], "1");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(config.servers["web"].timeout, Duration::from_millis(500));
    }

    #[test]
    fn refuses_what_it_cannot_honour_by_name() {
        for (document, needle) in [
            (json!({}), "mcpServers"),
            (
                json!({"mcpServers": {"a": {"command": "x", "shell": true}}}),
                "`shell`",
            ),
            (
                json!({"mcpServers": {"a": {"command": "x", "url": "http://h"}}}),
                "both",
            ),
            (json!({"mcpServers": {"a": {"url": "ftp://h"}}}), "`url`"),
            (
                json!({"mcpServers": {"a": {"type": "sse", "url": "http://h"}}}),
                "sse",
            ),
            (
                json!({"mcpServers": {"a b": {"command": "x"}}}),
                "server name",
            ),
            (
                json!({"mcpServers": {"a": {"command": "x", "args": "y"}}}),
                "`args`",
            ),
            (json!({"mcpServers": {"a": {}}}), "needs a `command`"),
            (
                json!({"mcpServers": {"a": {"command": "x", "timeout": 0}}}),
                "`timeout`",
            ),
            (
                json!({"mcpServers": {"a": {"url": "http://h", "headers": {"bad header": "v"}}}}),
                "header",
            ),
        ] {
            let error = McpConfig::from_json(&document).unwrap_err().to_string();
            assert!(error.contains(needle), "{document}: {error}");
        }
    }
}
