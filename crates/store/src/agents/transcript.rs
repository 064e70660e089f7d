//! An agent's transcript (JSONL, one message or event per line), read from where the last
//! capture ended: what the person said, the assistant's text and compaction summaries. Tool
//! calls, tool results, thinking and the harness's own lines are left out.
//!
//! The agents call their transcript formats internal and change them between versions, so
//! reading is tolerant: a line that is not JSON, not UTF-8, too long or of an unknown shape is
//! reported (by byte offset, never by content) and skipped. Only complete lines are read; a
//! line still being written is left for the next capture.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use serde_json::Value;

/// Whether the transcript at `path` is Codex's (its lines are `{"type", "payload"}`).
pub fn is_codex(path: &Path) -> bool {
    let Ok(file) = File::open(path) else { return false };
    let mut first = Vec::new();
    let _ = BufReader::new(file).take(64 << 10).read_until(b'\n', &mut first);
    serde_json::from_slice::<Value>(&first)
        .is_ok_and(|line| line.get("payload").is_some() && line.get("type").is_some())
}

/// Who said a part of the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
    /// A summary the agent wrote when it compacted the conversation.
    Summary,
}

impl Role {
    pub fn label(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Summary => "summary",
        }
    }
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Said {
    pub role: Role,
    pub text: String,
}

/// What a read found since `from`.
#[derive(Debug, Default)]
pub struct Since {
    pub said: Vec<Said>,
    /// The byte after the last complete line read: where the next capture starts.
    pub end: u64,
    /// Lines skipped, each with why (offset and reason, never the content).
    pub skipped: Vec<String>,
}

/// Lines longer than this are skipped without being held in memory.
pub const MAX_LINE: usize = 16 << 20;

/// Read `path` from byte `from`. A file shorter than `from` was replaced: it is read from the
/// start.
pub fn read_since(path: &Path, from: u64) -> std::io::Result<Since> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    let mut out = Since::default();
    let from = if len < from {
        out.skipped.push(format!(
            "the transcript is shorter than the last capture ({len} < {from} bytes): read from the start"
        ));
        0
    } else {
        from
    };
    file.seek(SeekFrom::Start(from))?;
    let mut reader = BufReader::with_capacity(1 << 16, file);
    let mut at = from;
    let mut line = Vec::new();
    loop {
        line.clear();
        let (read, complete, too_long) = read_line(&mut reader, &mut line)?;
        if read == 0 || !complete {
            break;
        }
        let start = at;
        at += read as u64;
        out.end = at;
        if too_long {
            out.skipped.push(format!("byte {start}: a line of {read} bytes, over {MAX_LINE}"));
            continue;
        }
        match parse_line(&line) {
            Ok(said) => out.said.extend(said),
            Err(why) => out.skipped.push(format!("byte {start}: {why}")),
        }
    }
    if out.end < from {
        out.end = from;
    }
    Ok(out)
}

/// One line into `line` (up to [`MAX_LINE`] bytes kept): bytes consumed, whether it ended with
/// a newline, and whether it was too long to keep.
fn read_line(reader: &mut impl BufRead, line: &mut Vec<u8>) -> std::io::Result<(usize, bool, bool)> {
    let mut read = 0;
    let mut too_long = false;
    loop {
        let limit = (MAX_LINE + 1).saturating_sub(line.len()) as u64;
        let n = if too_long {
            let mut sink = Vec::new();
            let n = reader.by_ref().take(1 << 20).read_until(b'\n', &mut sink)?;
            if sink.last() == Some(&b'\n') {
                return Ok((read + n, true, true));
            }
            n
        } else {
            let n = reader.by_ref().take(limit).read_until(b'\n', line)?;
            if line.last() == Some(&b'\n') {
                return Ok((read + n, true, false));
            }
            if line.len() > MAX_LINE {
                too_long = true;
                line.clear();
            }
            n
        };
        if n == 0 {
            return Ok((read, false, too_long));
        }
        read += n;
    }
}

/// The messages of one line, in the shape of Claude Code, Codex, Gemini CLI, Cursor or Copilot
/// CLI (told apart by the line).
fn parse_line(bytes: &[u8]) -> Result<Vec<Said>, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("not UTF-8 ({e})"))?;
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let line: Value = serde_json::from_str(text).map_err(|e| format!("not JSON ({e})"))?;
    if !line.is_object() {
        return Err("not a JSON object".into());
    }
    let kind = line.get("type").and_then(Value::as_str).unwrap_or_default();
    Ok(match line.get("payload") {
        Some(payload) => codex(&line, payload),
        None if line.get("data").is_some() && kind.contains('.') => copilot(kind, &line["data"]),
        None if line.get("role").is_some() && line.get("message").is_some() => cursor(&line),
        None if matches!(kind, "user" | "gemini") && line.get("content").is_some() => gemini(kind, &line["content"]),
        None => claude(&line),
    }
    .into_iter()
    .filter(|s| !s.text.trim().is_empty())
    .collect())
}

/// Claude Code: `{"type":"user"|"assistant","message":{"content": string | [blocks]}}`; a user
/// line holding tool results is not the person, `isMeta` lines and slash-command echoes are
/// the harness, and `isCompactSummary` marks the summary after a compaction.
fn claude(line: &Value) -> Vec<Said> {
    let kind = line.get("type").and_then(Value::as_str).unwrap_or_default();
    let role = match kind {
        "user" if line.get("isCompactSummary").and_then(Value::as_bool) == Some(true) => Role::Summary,
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "summary" => {
            let summary = line.get("summary").and_then(Value::as_str).unwrap_or_default();
            return vec![Said { role: Role::Summary, text: summary.to_string() }];
        }
        _ => return Vec::new(),
    };
    if line.get("isMeta").and_then(Value::as_bool) == Some(true)
        || line.get("isSidechain").and_then(Value::as_bool) == Some(true)
    {
        return Vec::new();
    }
    let Some(content) = line.get("message").and_then(|m| m.get("content")) else { return Vec::new() };
    let texts: Vec<String> = match content {
        Value::String(s) => vec![s.clone()],
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str).map(str::to_string))
            .collect(),
        _ => Vec::new(),
    };
    texts.into_iter().filter(|t| role != Role::User || !harness(t)).map(|text| Said { role, text }).collect()
}

/// Text the agent puts in a user line that the person did not type.
fn harness(text: &str) -> bool {
    let t = text.trim_start();
    ["<command-", "<local-command", "<system-reminder", "[Request interrupted", "Caveat: The messages below"]
        .iter()
        .any(|p| t.starts_with(p))
}

/// Gemini CLI (JSONL since 0.39): `{"type": "user", "content": [{"text"}]}` and
/// `{"type": "gemini", "content": "…"}`; a `<hook_context>` part is what hooks added (memfold's
/// own recall among them), not the person. Metadata, `$set` and `$rewindTo` lines say nothing.
fn gemini(kind: &str, content: &Value) -> Vec<Said> {
    let role = if kind == "user" { Role::User } else { Role::Assistant };
    let texts: Vec<&str> = match content {
        Value::String(s) => vec![s],
        Value::Array(parts) => parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect(),
        _ => Vec::new(),
    };
    texts
        .into_iter()
        .filter(|t| !t.trim_start().starts_with("<hook_context>"))
        .map(|t| Said { role, text: t.to_string() })
        .collect()
}

/// Cursor: `{"role": "user"|"assistant", "message": {"content": [{"type": "text", "text"}]}}`;
/// the person's words are wrapped in `<user_query>` (beside `<timestamp>` and what Cursor
/// attaches), so only what the wrapper holds is theirs.
fn cursor(line: &Value) -> Vec<Said> {
    let role = match line.get("role").and_then(Value::as_str) {
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        _ => return Vec::new(),
    };
    let content = &line["message"]["content"];
    let texts: Vec<&str> = match content {
        Value::String(s) => vec![s],
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect(),
        _ => Vec::new(),
    };
    texts
        .into_iter()
        .filter_map(|t| match role {
            Role::User => match (t.find("<user_query>"), t.find("</user_query>")) {
                (Some(start), Some(end)) if end > start => Some(t[start + "<user_query>".len()..end].trim()),
                _ if harness(t) || t.trim_start().starts_with('<') => None,
                _ => Some(t),
            },
            _ => Some(t),
        })
        .map(|text| Said { role, text: text.to_string() })
        .collect()
}

/// Copilot CLI (`session-state/<id>/events.jsonl`): `{"type": "user.message" |
/// "assistant.message", "data": {"content": "…"}}`; tool, hook and session events say nothing.
fn copilot(kind: &str, data: &Value) -> Vec<Said> {
    let role = match kind {
        "user.message" => Role::User,
        "assistant.message" => Role::Assistant,
        "session.compaction_complete" | "session.summary" => Role::Summary,
        _ => return Vec::new(),
    };
    let text = data.get("content").or_else(|| data.get("summary")).and_then(Value::as_str).unwrap_or_default();
    vec![Said { role, text: text.to_string() }]
}

/// Codex: `{"type": …, "payload": …}`. The person's words are `event_msg` `user_message`
/// (a `response_item` user message also carries injected instructions), the assistant's are
/// `response_item` messages with `output_text` blocks, and `compacted` holds the summary.
fn codex(line: &Value, payload: &Value) -> Vec<Said> {
    let kind = line.get("type").and_then(Value::as_str).unwrap_or_default();
    let inner = payload.get("type").and_then(Value::as_str).unwrap_or_default();
    let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_string();
    match (kind, inner) {
        ("event_msg", "user_message") => vec![Said { role: Role::User, text: text(payload.get("message")) }],
        ("compacted", _) => vec![Said { role: Role::Summary, text: text(payload.get("message")) }],
        ("response_item", "message") if payload.get("role").and_then(Value::as_str) == Some("assistant") => payload
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("output_text"))
            .map(|b| Said { role: Role::Assistant, text: text(b.get("text")) })
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn write(lines: &[&[u8]]) -> tempfile::NamedTempFile {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        for line in lines {
            file.write_all(line).unwrap();
        }
        file
    }

    #[test]
    fn claude_lines_give_the_person_and_the_assistant_text_only() {
        let file = write(&[
            br#"{"type":"user","message":{"role":"user","content":"fix the bug"},"uuid":"u1"}"#,
            b"\n",
            br#"{"type":"assistant","message":{"content":[{"type":"thinking","thinking":"hm"},{"type":"text","text":"Done."},{"type":"tool_use","id":"t","name":"Read","input":{}}]}}"#,
            b"\n",
            br#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":"secret file body"}]}}"#,
            b"\n",
            br#"{"type":"user","isMeta":true,"message":{"content":"<command-name>/clear</command-name>"}}"#,
            b"\n",
            br#"{"type":"user","message":{"content":"This session is being continued"},"isCompactSummary":true}"#,
            b"\n",
        ]);
        let read = read_since(file.path(), 0).unwrap();
        let said: Vec<(Role, &str)> = read.said.iter().map(|s| (s.role, s.text.as_str())).collect();
        assert_eq!(
            said,
            [
                (Role::User, "fix the bug"),
                (Role::Assistant, "Done."),
                (Role::Summary, "This session is being continued")
            ]
        );
        assert!(read.skipped.is_empty(), "{:?}", read.skipped);
    }

    #[test]
    fn codex_lines_give_user_messages_assistant_output_and_compactions() {
        let file = write(&[
            br#"{"timestamp":"t","type":"session_meta","payload":{"id":"x","cwd":"/p"}}"#,
            b"\n",
            br#"{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>"}]}}"#,
            b"\n",
            br#"{"timestamp":"t","type":"event_msg","payload":{"type":"user_message","message":"remember that we deploy on fridays"}}"#,
            b"\n",
            br#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call_output","call_id":"c","output":"ok"}}"#,
            b"\n",
            br#"{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Noted."}]}}"#,
            b"\n",
            br#"{"timestamp":"t","type":"compacted","payload":{"message":"summary text","replacement_history":[]}}"#,
            b"\n",
        ]);
        let read = read_since(file.path(), 0).unwrap();
        let said: Vec<(Role, &str)> = read.said.iter().map(|s| (s.role, s.text.as_str())).collect();
        assert_eq!(
            said,
            [
                (Role::User, "remember that we deploy on fridays"),
                (Role::Assistant, "Noted."),
                (Role::Summary, "summary text")
            ]
        );
    }

    fn said(file: &tempfile::NamedTempFile) -> Vec<(Role, String)> {
        read_since(file.path(), 0).unwrap().said.into_iter().map(|s| (s.role, s.text)).collect()
    }

    #[test]
    fn gemini_lines_give_the_person_and_the_model_without_hook_context() {
        let file = write(&[
            br#"{"sessionId":"3f2a","projectHash":"ab","startTime":"2026-08-21T16:16:58Z","lastUpdated":"2026-08-21T16:16:58Z"}"#,
            b"\n",
            br#"{"id":"a1","timestamp":"t","type":"user","content":[{"text":"fix the test"},{"text":"<hook_context>Remember that X</hook_context>"}]}"#,
            b"\n",
            br#"{"$set":{"lastUpdated":"t"}}"#,
            b"\n",
            br#"{"id":"b2","timestamp":"t","type":"gemini","content":"Done.","thoughts":[],"toolCalls":[{"id":"c","name":"replace","args":{}}]}"#,
            b"\n",
            br#"{"id":"i","timestamp":"t","type":"info","content":"Model switched"}"#,
            b"\n",
        ]);
        assert_eq!(said(&file), [(Role::User, "fix the test".into()), (Role::Assistant, "Done.".into())]);
    }

    #[test]
    fn cursor_lines_give_the_query_and_the_answer() {
        let file = write(&[
            br#"{"role":"user","message":{"content":[{"type":"text","text":"<timestamp>Sunday</timestamp>\n<user_query>\nremember that staging is on port 5433\n</user_query>"}]}}"#,
            b"\n",
            br#"{"role":"assistant","message":{"content":[{"type":"text","text":"Noted."},{"type":"tool_use","name":"Read","input":{}}]}}"#,
            b"\n",
            br#"{"type":"turn_ended","status":"success"}"#,
            b"\n",
        ]);
        assert_eq!(
            said(&file),
            [(Role::User, "remember that staging is on port 5433".into()), (Role::Assistant, "Noted.".into())]
        );
    }

    #[test]
    fn copilot_events_give_messages_only() {
        let file = write(&[
            br#"{"id":"1","timestamp":"t","parentId":null,"type":"session.start","data":{"sessionId":"s","context":{"cwd":"/p"}}}"#,
            b"\n",
            br#"{"id":"2","timestamp":"t","parentId":"1","type":"user.message","data":{"content":"remember that we ship on Thursdays"}}"#,
            b"\n",
            br#"{"id":"3","timestamp":"t","parentId":"2","type":"tool.execution_complete","data":{"result":{"content":"AKIA..."}}}"#,
            b"\n",
            br#"{"id":"4","timestamp":"t","parentId":"3","type":"assistant.message","data":{"content":"Got it.","toolRequests":[]}}"#,
            b"\n",
        ]);
        assert_eq!(
            said(&file),
            [(Role::User, "remember that we ship on Thursdays".into()), (Role::Assistant, "Got it.".into())]
        );
    }

    #[test]
    fn bad_lines_are_skipped_and_reported_and_a_partial_last_line_waits() {
        let big = format!(r#"{{"type":"user","message":{{"content":"{}"}}}}"#, "x".repeat(1 << 20));
        let file = write(&[
            b"not json\n",
            b"{\"type\":\"user\",\"message\":{\"content\":\"caf\xff\"}}\n",
            big.as_bytes(),
            b"\n",
            br#"{"type":"user","message":{"content":"after"}}"#,
            b"\n",
            br#"{"type":"user","message":{"content":"half"#,
        ]);
        let read = read_since(file.path(), 0).unwrap();
        assert_eq!(read.skipped.len(), 2, "{:?}", read.skipped);
        assert_eq!(read.said.len(), 2);
        assert_eq!(read.said[0].text.len(), 1 << 20);
        assert_eq!(read.said[1].text, "after");
        let len = std::fs::metadata(file.path()).unwrap().len();
        assert!(read.end < len, "the unfinished line is left for later");
        // From where it ended, nothing again.
        let again = read_since(file.path(), read.end).unwrap();
        assert!(again.said.is_empty());
        assert_eq!(again.end, read.end);
    }

    #[test]
    fn a_line_over_the_cap_is_skipped_without_being_kept() {
        let mut reader = std::io::Cursor::new([vec![b'a'; MAX_LINE + 10], b"\nnext\n".to_vec()].concat());
        let mut line = Vec::new();
        let (read, complete, too_long) = read_line(&mut reader, &mut line).unwrap();
        assert_eq!((read, complete, too_long), (MAX_LINE + 11, true, true));
        line.clear();
        assert_eq!(read_line(&mut reader, &mut line).unwrap(), (5, true, false));
        assert_eq!(line, b"next\n");
    }
}
