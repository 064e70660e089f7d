//! The layout docs/ARCHITECTURE.md describes, checked against the source: the folders are the
//! layers, dependencies point down, planning writes nothing, doors reach memory through the
//! service, and the code map names every folder there is. Also: every relative link in
//! README.md and docs/ leads to a file, and to a heading of it when it names one.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The layers, from the outside in: a module may use the ones after its own.
const LAYERS: [&str; 8] = ["doors", "service", "memory", "planning", "index", "models", "store", "sys"];

/// Where each layer's code lives (docs/ARCHITECTURE.md, "Crates"): the `memfold` crate holds
/// the doors and the service, `memfold-core` the use cases and planning, and the store crate
/// `sys` beside the files.
const HOMES: [(&str, &str); 8] = [
    ("doors", "src/doors"),
    ("service", "src/service"),
    ("memory", "crates/core/src/memory"),
    ("planning", "crates/core/src/planning"),
    ("index", "crates/index/src"),
    ("models", "crates/models/src"),
    ("store", "crates/store/src"),
    ("sys", "crates/store/src/sys"),
];

/// The files outside the layers, by the names the tests give them.
const TOP: [(&str, &str); 5] = [
    ("lib.rs", "src/lib.rs"),
    ("main.rs", "src/main.rs"),
    ("config.rs", "crates/store/src/config.rs"),
    ("error.rs", "crates/core/src/error.rs"),
    ("core.rs", "crates/core/src/lib.rs"),
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// Every `.rs` file under `dir`, relative to it, with its text.
fn walk_sources(dir: &Path, base: &Path, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            walk_sources(&path, base, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let name = path.strip_prefix(base).unwrap().to_string_lossy().into_owned();
            out.push((name, std::fs::read_to_string(&path).unwrap()));
        }
    }
}

/// Every source file of the workspace, named `layer/path` (`store/archive/mod.rs`,
/// `sys/clock.rs`) or, outside the layers, by its name in [`TOP`].
fn all_sources() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (layer, home) in HOMES {
        let mut files = Vec::new();
        walk_sources(&repo().join(home), &repo().join(home), &mut files);
        for (rel, text) in files {
            // The store crate's home holds `sys` and the configuration beside the files.
            if !(layer == "store" && (rel.starts_with("sys/") || rel == "config.rs")) {
                out.push((format!("{layer}/{rel}"), text));
            }
        }
    }
    for (name, path) in TOP {
        out.push((name.to_string(), std::fs::read_to_string(repo().join(path)).unwrap()));
    }
    out.sort();
    out
}

/// The sources of one layer (or one folder of it: `planning`, `doors`).
fn sources_of(prefix: &str) -> Vec<(String, String)> {
    all_sources().into_iter().filter(|(name, _)| name.starts_with(&format!("{prefix}/"))).collect()
}

/// A file's code without its test module (`#[cfg(test)] mod tests { … }` at the end) and
/// without comments; files of tests (`tests.rs`) have none.
fn code(name: &str, text: &str) -> String {
    if name.ends_with("/tests.rs") {
        return String::new();
    }
    // The test module at the end (`mod tests;`, a file of its own, ends nothing).
    let end = text.find("\n#[cfg(test)]\nmod tests {").unwrap_or(text.len());
    text[..end].lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

fn layer(name: &str) -> Option<usize> {
    let top = name.split('/').next()?;
    LAYERS.iter().position(|l| *l == top)
}

#[test]
fn the_workspace_is_the_crates_and_each_crate_its_layers() {
    let names = |dir: &str| -> (BTreeSet<String>, BTreeSet<String>) {
        let (mut files, mut folders) = (BTreeSet::new(), BTreeSet::new());
        for entry in std::fs::read_dir(repo().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                folders.insert(name)
            } else {
                files.insert(name)
            };
        }
        (files, folders)
    };
    let set = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(
        names("src"),
        (set(&["lib.rs", "main.rs"]), set(&["doors", "service"])),
        "src/ is the binary crate's doors and service"
    );
    assert_eq!(names("crates").1, set(&["core", "index", "models", "store"]), "the crates");
    assert_eq!(names("crates/core/src"), (set(&["error.rs", "lib.rs"]), set(&["memory", "planning"])));
    let members = std::fs::read_to_string(repo().join("Cargo.toml")).unwrap();
    for krate in ["crates/store", "crates/models", "crates/index", "crates/core"] {
        assert!(members.contains(&format!("\"{krate}\"")), "{krate} is no workspace member");
    }
}

/// The store crate builds without the index, the models or a server, and only the binary
/// crate has the doors' crates (HTTP server, MCP, templates, the command line's parser).
#[test]
fn each_crate_depends_only_on_what_its_layer_needs() {
    let deps = |krate: &str| -> BTreeSet<String> {
        let manifest: toml::Table =
            std::fs::read_to_string(repo().join(krate).join("Cargo.toml")).unwrap().parse().unwrap();
        ["dependencies", "dev-dependencies"]
            .iter()
            .filter_map(|section| manifest.get(*section).and_then(|d| d.as_table()))
            .flat_map(|table| table.keys().cloned())
            .collect()
    };
    let store = deps("crates/store");
    for heavy in
        ["lancedb", "lance", "axum", "rmcp", "reqwest", "hyper", "memfold-index", "memfold-models", "memfold-core"]
    {
        assert!(!store.contains(heavy), "the store crate depends on {heavy}");
    }
    assert!(!store.iter().any(|d| d.starts_with("candle")), "the store crate depends on candle");
    for krate in ["crates/store", "crates/models", "crates/index", "crates/core"] {
        for door in ["axum", "rmcp", "askama", "askama_web", "clap", "tower-http"] {
            assert!(!deps(krate).contains(door), "{krate} depends on {door}, a door's crate");
        }
    }
    assert!(!deps("crates/index").contains("memfold-core") && !deps("crates/models").contains("memfold-index"));
}

/// What a path names, by the layer its code lives in: `crate::` paths within a crate and the
/// other crates' names.
fn target_of(mine: &str, path: &str) -> Option<&'static str> {
    let first = |p: &str| -> String { p.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect() };
    let layer = |name: &str| LAYERS.iter().copied().find(|l| *l == name);
    if let Some(rest) = path.strip_prefix("crate::") {
        let head = first(rest);
        return match mine {
            "store" | "sys" => match head.as_str() {
                "sys" => Some("sys"),
                "config" => None,
                _ => Some("store"),
            },
            "index" | "models" => Some(if mine == "index" { "index" } else { "models" }),
            _ => layer(&head),
        };
    }
    let (krate, rest) = path.split_once("::")?;
    let head = first(rest);
    match krate {
        "memfold_store" => match head.as_str() {
            "sys" => Some("sys"),
            "config" => None,
            _ => Some("store"),
        },
        "memfold_index" => Some("index"),
        "memfold_models" => Some("models"),
        "memfold_core" => match head.as_str() {
            "Memory" => Some("memory"),
            other => layer(other),
        },
        _ => None,
    }
}

#[test]
fn dependencies_point_down_and_config_knows_no_server() {
    let mut up = Vec::new();
    for (name, text) in all_sources() {
        let code = code(&name, &text);
        let Some(mine) = layer(&name) else {
            if name == "config.rs" {
                for door in ["crate::doors", "crate::service", "memfold_"] {
                    assert!(!code.contains(door), "config.rs uses {door}");
                }
            }
            continue;
        };
        // The configuration sits above the files: it names a home's spaces, they read no setting.
        if matches!(LAYERS[mine], "store" | "sys") && code.contains("crate::config") {
            up.push(format!("{name}: {} uses config", LAYERS[mine]));
        }
        for (n, line) in code.lines().enumerate() {
            for (at, _) in line.match_indices("crate::").chain(line.match_indices("memfold_")) {
                let start = line[..at].rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).map_or(0, |i| i + 1);
                let Some(target) = target_of(LAYERS[mine], &line[start..]) else { continue };
                let theirs = LAYERS.iter().position(|l| *l == target).unwrap();
                if theirs < mine {
                    up.push(format!("{name}:{}: {} uses {target}", n + 1, LAYERS[mine]));
                }
            }
        }
    }
    assert!(up.is_empty(), "dependencies that point up:\n{}", up.join("\n"));
}

/// The run vocabulary (`planning/run/`) holds the shapes of runs and stored plans; the files
/// they are kept in are read and listed by the store (`store/runs.rs`), like every other file.
#[test]
fn the_run_records_are_read_through_the_store() {
    let mut found = Vec::new();
    for (name, text) in sources_of("planning/run") {
        let code = code(&name, &text);
        for io in ["std::fs", "read_dir", "File::open"] {
            if code.contains(io) {
                found.push(format!("{name}: {io}"));
            }
        }
    }
    assert!(found.is_empty(), "the run vocabulary reads files itself:\n{}", found.join("\n"));
}

#[test]
fn planning_writes_no_file() {
    const WRITES: [&str; 12] = [
        "fs::write",
        "write_atomic",
        "append_durable",
        "File::create",
        "OpenOptions",
        "remove_file",
        "remove_dir",
        "create_dir",
        "fs::rename",
        "set_permissions",
        "commit::commit",
        ".save(",
    ];
    let mut found = Vec::new();
    for (name, text) in sources_of("planning") {
        let code = code(&name, &text);
        for write in WRITES {
            if code.contains(write) {
                found.push(format!("{name}: {write}"));
            }
        }
    }
    assert!(found.is_empty(), "planning writes:\n{}", found.join("\n"));
}

#[test]
fn doors_reach_memory_only_through_the_service() {
    for (name, text) in sources_of("doors") {
        // The command line has no daemon to share: it is the one door that holds a Memory.
        if name == "doors/cli.rs" {
            continue;
        }
        let code = code(&name, &text);
        assert!(!code.contains(".memory()"), "{name} calls .memory()");
        assert!(!code.contains("std::fs::") && !code.contains("tokio::fs::"), "{name} touches files");
    }
}

/// The doors reach the layers below through the core's surface: `memory` (the use cases, their
/// requests and views, and `memory::text`, what rendering needs), `error`, the configuration
/// and `sys`; never the store's files, the index, the models or planning themselves. What the
/// hook and setup doors do with agents' files is the core's too (`memory::agents`).
#[test]
fn doors_reach_the_layers_below_through_the_core() {
    let mut reached = Vec::new();
    for (name, text) in sources_of("doors") {
        let code = code(&name, &text);
        for (n, line) in code.lines().enumerate() {
            for (at, _) in line.match_indices("memfold_") {
                let path = &line[at..];
                let allowed =
                    ["memfold_store::config", "memfold_store::sys", "memfold_core::memory", "memfold_core::error"]
                        .iter()
                        .any(|ok| path.starts_with(ok))
                        || path.starts_with("memfold_core::Memory");
                if !allowed {
                    let shown: String = path.chars().take_while(|c| !c.is_whitespace() && *c != ';').collect();
                    reached.push(format!("{name}:{}: {shown}", n + 1));
                }
            }
        }
    }
    assert!(reached.is_empty(), "doors that reach below the core's surface:\n{}", reached.join("\n"));
}

#[test]
fn no_source_file_is_over_900_lines_and_there_is_one_stemmer() {
    for (name, text) in all_sources() {
        let lines = code(&name, &text).lines().count();
        assert!(lines <= 900, "{name}: {lines} lines");
        if name != "planning/consolidate/stem.rs" {
            assert!(!text.contains("fn stem("), "{name} stems words of its own");
        }
    }
}

/// Functions of over 100 lines (from `fn` to its closing brace, comments included, as
/// rustfmt lays them out), tests left out.
fn long_functions() -> Vec<(usize, String)> {
    let mut long = Vec::new();
    for (name, text) in all_sources() {
        if name.ends_with("/tests.rs") {
            continue;
        }
        let text = &text[..text.find("\n#[cfg(test)]\nmod tests {").unwrap_or(text.len())];
        let lines: Vec<&str> = text.lines().collect();
        for (at, line) in lines.iter().enumerate() {
            let body = line.trim_start();
            let indent = &line[..line.len() - body.len()];
            let words: Vec<&str> = body.split_whitespace().collect();
            let Some(fn_at) = words.iter().position(|w| *w == "fn") else { continue };
            let leading_ok =
                words[..fn_at].iter().all(|w| w.starts_with("pub") || ["async", "const", "unsafe"].contains(w));
            if !leading_ok || body.ends_with(';') {
                continue;
            }
            let close = format!("{indent}}}");
            if let Some(end) = lines[at + 1..].iter().position(|l| *l == close) {
                let n = end + 2;
                if n > 100 {
                    let fn_name: String = words
                        .get(fn_at + 1)
                        .unwrap_or(&"")
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    long.push((n, format!("{name}:{}: {fn_name}", at + 1)));
                }
            }
        }
    }
    long.sort();
    long
}

#[test]
fn at_most_three_functions_are_over_100_lines() {
    let long = long_functions();
    assert!(long.len() <= 3, "functions over 100 lines:\n{long:#?}");
}

/// One clock (docs/ARCHITECTURE.md, invariant 7): the system's time is read by `sys::clock`
/// alone, so a configured zone or a moved clock holds for every stamp memfold writes. (A file's
/// age is the file system's: `SystemTime` against an mtime is left to the two places that do it.)
#[test]
fn the_time_is_read_in_one_place() {
    for (name, text) in all_sources() {
        if name == "sys/clock.rs" {
            continue;
        }
        let code = code(&name, &text);
        for read in ["Utc::now", "Local::now"] {
            assert!(!code.contains(read), "{name} reads the time itself ({read}): ask sys::clock");
        }
    }
}

/// A mutex is locked one way, `sys::guard` (a poisoned one too): no helper of its own, no
/// poison handling written out at a call.
#[test]
fn a_mutex_is_locked_one_way() {
    for (name, text) in all_sources() {
        if name == "sys/mod.rs" {
            continue;
        }
        assert!(!text.contains("fn lock<T>("), "{name} has a lock helper of its own");
        assert!(!text.contains(".lock().unwrap_or_else("), "{name} handles a poisoned mutex itself");
    }
}

#[test]
fn tests_have_one_skip_helper() {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    for entry in std::fs::read_dir(&tests).unwrap().chain(std::fs::read_dir(tests.join("common")).unwrap()) {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") && path.file_name().is_some_and(|n| n != "layout.rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(!text.contains("fn skip("), "{} has a skip of its own", path.display());
        }
    }
}

/// Every folder of a layer is named in docs/ARCHITECTURE.md's code map (as `name/`, inside
/// the bullet of its layer), and every folder the map names is a folder of a layer.
#[test]
fn the_code_map_names_every_folder_and_only_those() {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/ARCHITECTURE.md")).unwrap();
    let map = &doc[doc.find("## Code map").expect("a code map")..];
    let map = &map[..map[3..].find("\n## ").map_or(map.len(), |i| i + 3)];
    // The bullet of each layer: from `- `layer/`` to the next bullet.
    let bullet = |layer: &str| -> &str {
        let at =
            map.find(&format!("- `{layer}/`")).unwrap_or_else(|| panic!("the code map has no bullet for `{layer}/`"));
        let rest = &map[at + 2..];
        &rest[..rest.find("\n- ").unwrap_or(rest.len())]
    };
    let mut folders = BTreeSet::new();
    for (name, _) in all_sources() {
        let parts: Vec<&str> = name.split('/').collect();
        for end in 1..parts.len() {
            folders.insert(parts[..end].join("/"));
        }
    }
    for folder in &folders {
        let layer = folder.split('/').next().unwrap();
        let name = folder.rsplit('/').next().unwrap();
        assert!(bullet(layer).contains(&format!("`{name}/`")), "the code map does not name `{folder}/`");
    }
    let names: BTreeSet<&str> = folders.iter().map(|f| f.rsplit('/').next().unwrap()).collect();
    for (at, _) in map.match_indices('`') {
        let named: String = map[at + 1..].chars().take_while(|c| *c != '`').collect();
        if let Some(name) =
            named.strip_suffix('/').filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        {
            assert!(
                name == "src" || names.contains(name),
                "the code map names `{named}`, which is no folder of a layer"
            );
        }
    }
}

/// GitHub's anchor for a heading: lowercase, every character but letters, digits, spaces, `-`
/// and `_` removed, spaces made `-`.
fn anchor(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The lines of a markdown file inside fenced code blocks (`code`) or outside them, with
/// their line numbers.
fn lines_of(text: &str, code: bool) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if fenced == code {
            out.push((n + 1, line));
        }
    }
    out
}

/// The lines of a markdown file outside fenced code blocks, with their line numbers.
fn prose(text: &str) -> Vec<(usize, &str)> {
    lines_of(text, false)
}

/// The anchors of a markdown file's headings (a repeated heading gets `-1`, `-2`, … as on GitHub).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (_, line) in prose(text) {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
            let base = anchor(line[hashes..].trim());
            let mut name = base.clone();
            let mut n = 0;
            while out.contains(&name) {
                n += 1;
                name = format!("{base}-{n}");
            }
            out.insert(name);
        }
    }
    out
}

/// The targets of a line's markdown links and images, `[text](target)`, code spans left out.
fn link_targets(line: &str) -> Vec<String> {
    let mut plain = String::new();
    for (i, part) in line.split('`').enumerate() {
        plain.push_str(if i % 2 == 0 { part } else { "code" });
    }
    plain
        .match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &plain[at + 2..];
            rest.find(')').map(|end| rest[..end].trim().to_string())
        })
        .collect()
}

/// README.md and the pages of docs/, sorted.
fn doc_files(repo: &Path) -> Vec<PathBuf> {
    let mut files = vec![repo.join("README.md")];
    for entry in std::fs::read_dir(repo.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            files.push(path);
        }
    }
    files.sort();
    files
}

#[test]
fn every_relative_link_in_the_docs_resolves() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = doc_files(repo);
    assert!(files.len() > 2, "README.md and the pages of docs/: {files:?}");
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let name = file.strip_prefix(repo).unwrap().display().to_string();
        for (n, line) in prose(&text) {
            for target in link_targets(line) {
                if ["http://", "https://", "mailto:"].iter().any(|s| target.starts_with(s)) {
                    continue;
                }
                checked += 1;
                let (path, fragment) = match target.split_once('#') {
                    Some((path, fragment)) => (path, Some(fragment)),
                    None => (target.as_str(), None),
                };
                let to = if path.is_empty() { file.clone() } else { file.parent().unwrap().join(path) };
                if !to.exists() {
                    broken.push(format!("{name}:{n}: {target} (no such file)"));
                    continue;
                }
                if let Some(fragment) = fragment
                    && to.extension().is_some_and(|e| e == "md")
                    && !anchors(&std::fs::read_to_string(&to).unwrap()).contains(fragment)
                {
                    broken.push(format!("{name}:{n}: {target} (no such heading)"));
                }
            }
        }
    }
    assert!(checked > 20, "only {checked} relative links found: is the link parser right?");
    assert!(broken.is_empty(), "links that lead nowhere:\n{}", broken.join("\n"));
}

/// A command line's words, as a shell splits them (quotes kept together), up to the first
/// comment, pipe, redirection, `&&` or `;`.
fn shell_words(line: &str) -> Vec<String> {
    let (mut words, mut word, mut quote, mut in_word) = (Vec::new(), String::new(), None, false);
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, '#' | '|' | '>' | '<' | ';' | '&') if !in_word => break,
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

#[test]
fn every_memfold_command_line_in_the_docs_names_commands_and_flags_that_exist() {
    use clap::Parser;
    use clap::error::ErrorKind;
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = doc_files(repo);
    let (mut checked, mut wrong) = (0, Vec::new());
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let name = file.strip_prefix(repo).unwrap().display().to_string();
        for (n, line) in lines_of(&text, true) {
            let line = line.trim_start().trim_start_matches("$ ");
            let words = shell_words(line);
            if words.first().map(String::as_str) != Some("memfold") {
                continue;
            }
            checked += 1;
            // Placeholders and missing values are the reader's to fill in; a command or flag
            // the binary does not know is the docs' mistake.
            if let Err(e) = memfold::doors::cli::Cli::try_parse_from(&words)
                && matches!(e.kind(), ErrorKind::UnknownArgument | ErrorKind::InvalidSubcommand)
            {
                wrong.push(format!("{name}:{n}: {line}\n    {}", e.to_string().lines().next().unwrap_or_default()));
            }
        }
    }
    assert!(checked > 20, "only {checked} memfold command lines found in the docs' code blocks");
    assert!(wrong.is_empty(), "command lines the binary does not take:\n{}", wrong.join("\n"));
}

#[test]
fn every_command_has_a_row_in_the_commands_page() {
    use clap::CommandFactory;
    let page = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/commands.md")).unwrap();
    let rows: Vec<&str> = page.lines().filter(|l| l.starts_with("| `")).collect();
    let missing: Vec<String> = memfold::doors::cli::Cli::command()
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .filter(|name| {
            !rows.iter().any(|row| {
                // The command's cell: `name …`, or one of several names split by / or \|.
                let cell = row.split(" | ").next().unwrap_or_default();
                cell.split(['/', '`']).any(|part| part.trim().split([' ', '\\']).next() == Some(name.as_str()))
            })
        })
        .collect();
    assert!(missing.is_empty(), "commands without a row in docs/commands.md: {missing:?}");
}

#[test]
fn every_configuration_key_is_in_config_example_toml() {
    let example = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("config.example.toml")).unwrap();
    let defaults = serde_json::to_value(memfold::config::Config::default()).unwrap();
    let mut missing = Vec::new();
    for (section, table) in defaults.as_object().unwrap() {
        let Some(table) = table.as_object() else { continue };
        let header = format!("[{section}]");
        let Some(start) = example.lines().position(|l| l.trim() == header) else {
            missing.push(header);
            continue;
        };
        let body: Vec<&str> = example.lines().skip(start + 1).take_while(|l| !l.starts_with('[')).collect();
        for key in table.keys() {
            let named = body.iter().any(|l| {
                let l = l.trim_start_matches('#').trim();
                l.starts_with(&format!("{key} =")) || l.starts_with(&format!("{key}="))
            });
            if !named {
                missing.push(format!("{section}.{key}"));
            }
        }
    }
    assert!(missing.is_empty(), "settings config.example.toml does not show: {missing:?}");
}

#[test]
fn the_debian_package_names_files_that_exist_and_a_unit_systemd_accepts() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest: toml::Table = std::fs::read_to_string(repo.join("Cargo.toml")).unwrap().parse().unwrap();
    let assets = manifest["package"]["metadata"]["deb"]["assets"].as_array().expect("[package.metadata.deb] assets");
    for asset in assets {
        let source = asset[0].as_str().unwrap();
        if source.starts_with("target/") {
            continue; // built by `cargo build --release`
        }
        let found = match source.split_once('*') {
            Some((dir, suffix)) => std::fs::read_dir(repo.join(dir))
                .unwrap()
                .any(|e| e.unwrap().file_name().to_string_lossy().ends_with(suffix)),
            None => repo.join(source).is_file(),
        };
        assert!(found, "the package's {source} is not in the repository");
    }
    let unit = repo.join("contrib/deb/memfold.service");
    let text = std::fs::read_to_string(&unit).unwrap();
    assert!(text.contains("ExecStart=/usr/bin/memfold ") && text.contains("RestartPreventExitStatus=2"));
}
