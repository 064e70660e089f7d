//! The layout docs/ARCHITECTURE.md describes, checked against the source: the folders are the
//! layers, dependencies point down, planning writes nothing, doors reach memory through the
//! service, and the code map names every folder there is. Also: every relative link in
//! README.md and docs/ leads to a file, and to a heading of it when it names one.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The layers, from the outside in: a module may use the ones after its own.
const LAYERS: [&str; 8] = ["doors", "service", "memory", "planning", "index", "models", "store", "sys"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`, with its path relative to `src/`.
fn sources(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            let name = path.strip_prefix(src()).unwrap().to_string_lossy().into_owned();
            out.push((name, std::fs::read_to_string(&path).unwrap()));
        }
    }
    out.sort();
    out
}

/// A file's code without its test module (`#[cfg(test)] mod tests { … }` at the end) and
/// without comments; files of tests (`tests.rs`) have none.
fn code(name: &str, text: &str) -> String {
    if name.ends_with("/tests.rs") {
        return String::new();
    }
    let end = text.find("\n#[cfg(test)]\nmod tests").unwrap_or(text.len());
    text[..end].lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

fn layer(name: &str) -> Option<usize> {
    let top = name.split('/').next()?;
    LAYERS.iter().position(|l| *l == top)
}

#[test]
fn the_top_of_src_is_the_layers_and_a_few_files() {
    let mut files = Vec::new();
    let mut folders = BTreeSet::new();
    for entry in std::fs::read_dir(src()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            folders.insert(name);
        } else {
            files.push(name);
        }
    }
    assert!(files.len() <= 6, "{files:?}");
    assert_eq!(folders, LAYERS.iter().map(|l| l.to_string()).collect(), "every folder of src/ is a layer");
}

#[test]
fn dependencies_point_down_and_config_knows_no_server() {
    let mut up = Vec::new();
    for (name, text) in sources(&src()) {
        let code = code(&name, &text);
        let Some(mine) = layer(&name) else {
            if name == "config.rs" {
                for door in ["crate::doors", "crate::service"] {
                    assert!(!code.contains(door), "config.rs uses {door}");
                }
            }
            continue;
        };
        for (n, line) in code.lines().enumerate() {
            for (at, _) in line.match_indices("crate::") {
                let target: String =
                    line[at + 7..].chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect();
                if let Some(theirs) = LAYERS.iter().position(|l| *l == target)
                    && theirs < mine
                {
                    up.push(format!("{name}:{}: {} uses {target}", n + 1, LAYERS[mine]));
                }
            }
        }
    }
    assert!(up.is_empty(), "dependencies that point up:\n{}", up.join("\n"));
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
    for (name, text) in sources(&src().join("planning")) {
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
    for (name, text) in sources(&src().join("doors")) {
        // The command line has no daemon to share: it is the one door that holds a Memory.
        if name == "doors/cli.rs" {
            continue;
        }
        let code = code(&name, &text);
        assert!(!code.contains(".memory()"), "{name} calls .memory()");
        assert!(!code.contains("std::fs::") && !code.contains("tokio::fs::"), "{name} touches files");
    }
}

#[test]
fn no_source_file_is_over_900_lines_and_there_is_one_stemmer() {
    for (name, text) in sources(&src()) {
        let lines = code(&name, &text).lines().count();
        assert!(lines <= 900, "{name}: {lines} lines");
        if name != "planning/consolidate/stem.rs" {
            assert!(!text.contains("fn stem("), "{name} stems words of its own");
        }
    }
}

/// A mutex is locked one way, `sys::guard` (a poisoned one too): no helper of its own, no
/// poison handling written out at a call.
#[test]
fn a_mutex_is_locked_one_way() {
    for (name, text) in sources(&src()) {
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

/// Every folder under `src/` is named in docs/ARCHITECTURE.md's code map (as `name/`, inside
/// the bullet of its layer), and every folder the map names is a folder of `src/`.
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
    fn walk(dir: &Path, out: &mut BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                out.insert(path.strip_prefix(src()).unwrap().display().to_string());
                walk(&path, out);
            }
        }
    }
    walk(&src(), &mut folders);
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
            assert!(name == "src" || names.contains(name), "the code map names `{named}`, which is no folder of src/");
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
