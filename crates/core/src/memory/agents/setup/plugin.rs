//! memfold's plugin for OpenCode, which has no hooks file: a JavaScript file in OpenCode's
//! `plugins/` folder that runs `memfold hook EVENT --agent opencode` the way other agents run
//! hooks, with a payload in memfold's shape (`session_id`, `cwd`, `prompt`, and the session's
//! `messages` for a capture). The file is memfold's whole: setup writes it, `--remove` takes it
//! away; the command line it runs is one JSON list on its `const MEMFOLD` line, which is how a
//! later setup knows the file as this memory's.

use std::path::{Path, PathBuf};

use memfold_store::agents::settings::{self, Edit, Ours};

/// The line that holds the command.
const COMMAND_LINE: &str = "const MEMFOLD = ";

/// The plugin's text: recall at session start and for each prompt (added to that turn's system
/// prompt), capture when the session goes idle, is compacted or is deleted. It never stands in
/// OpenCode's way: a memfold that fails or is missing adds nothing.
fn render(exe: &str, args: &[String]) -> String {
    let command: Vec<&str> = std::iter::once(exe).chain(args.iter().map(String::as_str)).collect();
    let command = serde_json::to_string(&command).expect("strings serialise");
    format!(
        r#"// memfold's plugin for OpenCode: written by `memfold setup opencode`, taken away by
// `memfold setup opencode --remove`. It recalls memory at session start and for each prompt
// (added to that turn's system prompt) and captures the conversation when a session goes idle.
import {{ spawnSync }} from "node:child_process";

{COMMAND_LINE}{command};

function hook(event, payload) {{
  try {{
    const ran = spawnSync(MEMFOLD[0], [...MEMFOLD.slice(1), "hook", event, "--agent", "opencode"], {{
      input: JSON.stringify(payload),
      encoding: "utf8",
      timeout: 30000,
    }});
    const out = (ran.stdout || "").trim();
    return out ? JSON.parse(out).additionalContext || "" : "";
  }} catch {{
    return "";
  }}
}}

export const MemfoldPlugin = async ({{ client, directory }}) => {{
  const told = new Map();
  const said = async (id) => {{
    const answer = await client.session.messages({{ path: {{ id }} }});
    return (answer.data || []).flatMap(({{ info, parts }}) => {{
      const text = (parts || [])
        .filter((p) => p.type === "text" && !p.synthetic)
        .map((p) => p.text)
        .join("\n");
      return text ? [{{ role: info.role, text }}] : [];
    }});
  }};
  const capture = async (event, id) => {{
    try {{
      hook(event, {{ session_id: id, cwd: directory, messages: await said(id) }});
    }} catch {{}}
  }};
  const start = (id) => {{
    if (!told.has(id)) told.set(id, {{ start: hook("session-start", {{ session_id: id, cwd: directory, source: "startup" }}), prompt: "" }});
    return told.get(id);
  }};
  return {{
    event: async ({{ event }}) => {{
      const id = event.properties?.sessionID ?? event.properties?.info?.id;
      if (!id) return;
      if (event.type === "session.created") start(id);
      else if (event.type === "session.idle") await capture("stop", id);
      else if (event.type === "session.compacted") await capture("post-compact", id);
      else if (event.type === "session.deleted") {{
        hook("session-end", {{ session_id: id, cwd: directory }});
        told.delete(id);
      }}
    }},
    "chat.message": async (input, output) => {{
      const prompt = (output.parts || [])
        .filter((p) => p.type === "text")
        .map((p) => p.text)
        .join("\n");
      start(input.sessionID).prompt = hook("user-prompt-submit", {{ session_id: input.sessionID, cwd: directory, prompt }});
    }},
    "experimental.chat.system.transform": async (input, output) => {{
      const context = input.sessionID && told.get(input.sessionID);
      if (context) output.system.push(...[context.start, context.prompt].filter(Boolean));
    }},
  }};
}};
"#
    )
}

/// The command line a plugin file runs (from its `const MEMFOLD` line).
pub fn command_of(text: &str) -> Option<Vec<String>> {
    let line = text.lines().find_map(|l| l.strip_prefix(COMMAND_LINE))?;
    serde_json::from_str(line.trim_end().trim_end_matches(';')).ok()
}

/// The plugin file of this memory in `plugins`: `memfold.js`, or when that is another memory's,
/// `<fallback>.js`.
fn file(plugins: &Path, ours: &Ours) -> PathBuf {
    let mine = |path: &Path| {
        let text = settings::read(path).ok().flatten().unwrap_or_default();
        command_of(&text).is_some_and(|words| ours.words(words.iter().map(String::as_str)))
    };
    let first = plugins.join("memfold.js");
    match !first.exists() || mine(&first) {
        true => first,
        false => plugins.join(format!("{}.js", ours.fallback_name)),
    }
}

/// The edit that writes (or with `remove`, takes away) this memory's plugin.
pub fn edit(plugins: &Path, exe: &str, args: &[String], ours: &Ours, remove: bool) -> Result<Edit, String> {
    let path = file(plugins, ours);
    let before = settings::read(&path)?;
    let theirs =
        before.as_deref().is_some_and(|t| !command_of(t).is_some_and(|w| ours.words(w.iter().map(String::as_str))));
    if theirs {
        // The fallback name is another memory's too: leave it.
        return Err(format!("{} is another memory's plugin; nothing was changed", path.display()));
    }
    let after = match remove {
        true => None,
        false => Some(render(exe, args)),
    };
    Ok(Edit { path, before, after })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plugin_names_its_command_on_one_line() {
        let args = vec!["--root".to_string(), "/m y/root".to_string()];
        let text = render("/usr/bin/memfold", &args);
        assert_eq!(command_of(&text).unwrap(), ["/usr/bin/memfold", "--root", "/m y/root"]);
        assert!(text.contains("export const MemfoldPlugin"), "{text}");
    }
}
