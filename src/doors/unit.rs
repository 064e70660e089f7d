//! `memfold service install|uninstall`: the daemon as this user's service, systemd's user unit
//! on Linux, a launchd agent on macOS, written with this binary's absolute path and the root
//! or home memfold was given, then enabled and started.
//!
//! Rendering is pure (`unit`, `plist`); `run` writes the files and asks the service
//! manager. A file memfold did not write (no [`MARK`]) is never replaced or removed.

use std::path::{Path, PathBuf};
use std::process::Command;

use clap::{Args, Subcommand};

use memfold_store::config::Config;
use memfold_store::sys::unit::{self as unit_files, Found};

#[derive(Debug, Subcommand)]
pub enum ServiceAction {
    /// Write the unit (or plist), then enable and start it.
    Install {
        #[command(flatten)]
        how: ServiceArgs,
    },
    /// Stop and disable it, and remove the file it was installed with.
    Uninstall {
        #[command(flatten)]
        how: ServiceArgs,
    },
    /// Start the installed service.
    Start {
        #[command(flatten)]
        how: ServiceArgs,
    },
    /// Stop it (gracefully: open requests finish, a pass in flight is dropped intact).
    Stop {
        #[command(flatten)]
        how: ServiceArgs,
    },
    /// Restart it (a new binary or configuration takes effect).
    Restart {
        #[command(flatten)]
        how: ServiceArgs,
    },
    /// What the service manager says of it.
    Status {
        #[command(flatten)]
        how: ServiceArgs,
    },
    /// The last 100 lines of its log.
    Logs {
        /// And what comes after, until interrupted.
        #[arg(long, short)]
        follow: bool,
        #[command(flatten)]
        how: ServiceArgs,
    },
}

#[derive(Debug, Args)]
pub struct ServiceArgs {
    /// systemd or launchd [default: this system's].
    #[arg(long, value_enum)]
    pub manager: Option<Manager>,
    /// Print the file and the commands (or the command); write and run nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// install, uninstall: write (or remove) the file, but leave the service manager alone.
    #[arg(long)]
    pub no_start: bool,
}

/// `memfold service ACTION`: the unit or plist written, removed or controlled.
pub fn command(config: &Config, config_file: Option<&Path>, action: ServiceAction) -> Result<i32, String> {
    let (remove, how, control) = match action {
        ServiceAction::Install { how } => (false, how, None),
        ServiceAction::Uninstall { how } => (true, how, None),
        ServiceAction::Start { how } => (false, how, Some(Control::Start)),
        ServiceAction::Stop { how } => (false, how, Some(Control::Stop)),
        ServiceAction::Restart { how } => (false, how, Some(Control::Restart)),
        ServiceAction::Status { how } => (false, how, Some(Control::Status)),
        ServiceAction::Logs { follow, how } => (false, how, Some(Control::Logs { follow })),
    };
    let user_home = memfold_core::memory::agents::user_home()?;
    let service = Service::of(config, config_file, &user_home)?;
    let manager = how.manager.unwrap_or_else(Manager::here);
    if let Some(what) = control {
        return self::control(&service, manager, what, how.dry_run);
    }
    let request = Request { manager, remove, dry_run: how.dry_run, no_start: how.no_start };
    run(&service, &request)
}

/// What the files memfold writes say first, so that `uninstall` (and a second `install`) know
/// them for memfold's.
pub const MARK: &str = "Written by `memfold service install`";

/// Which service manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Manager {
    /// A systemd user unit (`~/.config/systemd/user/memfold.service`).
    Systemd,
    /// A launchd user agent (`~/Library/LaunchAgents/com.memfold.plist`).
    Launchd,
}

impl Manager {
    /// The one this system runs.
    pub fn here() -> Manager {
        if cfg!(target_os = "macos") { Manager::Launchd } else { Manager::Systemd }
    }
}

/// What the service runs: this binary on the root or home, with the configuration file given.
#[derive(Debug, Clone, PartialEq)]
pub struct Service {
    pub exe: PathBuf,
    /// `--home DIR` or `--root DIR`, and `--config FILE` when given.
    pub args: Vec<String>,
    /// The user's home folder (launchd expands no `~`).
    pub user_home: PathBuf,
}

impl Service {
    /// The service of `config`'s root or home, run by this binary.
    pub fn of(config: &Config, config_file: Option<&Path>, user_home: &Path) -> Result<Service, String> {
        let exe = std::env::current_exe().map_err(|e| format!("finding this program: {e}"))?;
        let exe = exe.canonicalize().unwrap_or(exe);
        let absolute =
            |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()).to_string_lossy().into_owned();
        let mut args = match &config.home {
            Some(home) => vec!["--home".to_string(), absolute(home)],
            None => vec!["--root".to_string(), absolute(&config.root)],
        };
        if let Some(file) = config_file {
            args.extend(["--config".to_string(), absolute(file)]);
        }
        Ok(Service { exe, args, user_home: user_home.to_path_buf() })
    }

    /// Where the unit or plist goes.
    pub fn file(&self, manager: Manager) -> PathBuf {
        match manager {
            Manager::Systemd => config_home(&self.user_home).join("systemd/user/memfold.service"),
            Manager::Launchd => self.user_home.join("Library/LaunchAgents/com.memfold.plist"),
        }
    }

    /// The settings file the systemd unit reads (variables, secrets among them: 0600).
    pub fn env_file(&self) -> PathBuf {
        config_home(&self.user_home).join("memfold/memfold.env")
    }

    fn log_file(&self) -> PathBuf {
        self.user_home.join("Library/Logs/memfold.log")
    }
}

/// `$XDG_CONFIG_HOME`, else `~/.config`.
fn config_home(user_home: &Path) -> PathBuf {
    std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| user_home.join(".config"))
}

/// One word of an `ExecStart=` line: quoted, with systemd's specifiers and variables escaped.
fn systemd_word(word: &str) -> String {
    let escaped = word.replace('\\', "\\\\").replace('"', "\\\"").replace('%', "%%").replace('$', "$$");
    format!("\"{escaped}\"")
}

fn systemd_command(service: &Service, verb: &str) -> String {
    std::iter::once(service.exe.to_string_lossy().into_owned())
        .chain(service.args.iter().cloned())
        .chain(std::iter::once(verb.to_string()))
        .map(|w| systemd_word(&w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The systemd user unit.
pub fn unit(service: &Service) -> String {
    format!(
        "# {MARK}; `memfold service uninstall` removes it.
# Logs: journalctl --user -u memfold -f
# Settings: the memory's memfold.toml, or variables in {env} (0600: it may hold secrets).

[Unit]
Description=memfold: long-term memory for AI agents, kept as markdown
After=network-online.target

[Service]
Type=simple
ExecStartPre={init}
ExecStart={serve}
EnvironmentFile=-{env_quoted}
Environment=MEMFOLD_LOG=info
LimitNOFILE=65536
# SIGTERM starts memfold's graceful shutdown: open requests finish, a pass in flight is
# dropped with the files intact, and it exits 0.
KillSignal=SIGTERM
KillMode=mixed
TimeoutStopSec=30
Restart=on-failure
RestartSec=5
# Exit 2 is a configuration error or another daemon on the same memory: restarting would
# not help.
RestartPreventExitStatus=2
NoNewPrivileges=yes

[Install]
WantedBy=default.target
",
        env = service.env_file().display(),
        env_quoted = service.env_file().display().to_string().replace('%', "%%"),
        init = systemd_command(service, "init"),
        serve = systemd_command(service, "serve"),
    )
}

fn xml(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The launchd agent's property list.
pub fn plist(service: &Service) -> String {
    let args: String = std::iter::once(service.exe.to_string_lossy().into_owned())
        .chain(service.args.iter().cloned())
        .chain(std::iter::once("serve".to_string()))
        .map(|a| format!("        <string>{}</string>\n", xml(&a)))
        .collect();
    let log = xml(&service.log_file().to_string_lossy());
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<!-- {MARK}; `memfold service uninstall` removes it. Logs: {log} -->
<plist version="1.0">
<dict>
    <key>Label</key>
    <string>com.memfold</string>
    <key>ProgramArguments</key>
    <array>
{args}    </array>
    <key>EnvironmentVariables</key>
    <dict>
        <key>MEMFOLD_LOG</key>
        <string>info</string>
    </dict>
    <key>RunAtLoad</key>
    <true/>
    <key>KeepAlive</key>
    <dict>
        <key>SuccessfulExit</key>
        <false/>
    </dict>
    <key>SoftResourceLimits</key>
    <dict>
        <key>NumberOfFiles</key>
        <integer>65536</integer>
    </dict>
    <key>ThrottleInterval</key>
    <integer>10</integer>
    <key>ExitTimeOut</key>
    <integer>30</integer>
    <key>ProcessType</key>
    <string>Background</string>
    <key>StandardErrorPath</key>
    <string>{log}</string>
    <key>StandardOutPath</key>
    <string>{log}</string>
</dict>
</plist>
"#
    )
}

/// What `service install|uninstall` was asked to do.
#[derive(Debug, Clone)]
pub struct Request {
    pub manager: Manager,
    pub remove: bool,
    /// Print the file and the commands; write and run nothing.
    pub dry_run: bool,
    /// Write (or remove) the files, but ask the service manager nothing.
    pub no_start: bool,
}

/// The commands that start (or stop) the service once its file is written (or before it is
/// removed).
fn commands(manager: Manager, file: &Path, remove: bool) -> Vec<Vec<String>> {
    let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let uid = memfold_store::sys::access::user_id();
    match (manager, remove) {
        (Manager::Systemd, false) => vec![
            words(&["systemctl", "--user", "daemon-reload"]),
            words(&["systemctl", "--user", "enable", "memfold.service"]),
            // Starts it, or restarts it on a unit just rewritten.
            words(&["systemctl", "--user", "restart", "memfold.service"]),
        ],
        (Manager::Systemd, true) => vec![
            words(&["systemctl", "--user", "disable", "--now", "memfold.service"]),
            words(&["systemctl", "--user", "daemon-reload"]),
        ],
        (Manager::Launchd, false) => {
            vec![words(&["launchctl", "bootstrap", &format!("gui/{uid}"), &file.to_string_lossy()])]
        }
        (Manager::Launchd, true) => vec![words(&["launchctl", "bootout", &format!("gui/{uid}/com.memfold")])],
    }
}

/// Run `service install` or `uninstall`; prints each step.
pub fn run(service: &Service, request: &Request) -> Result<i32, String> {
    let file = service.file(request.manager);
    let text = match request.manager {
        Manager::Systemd => unit(service),
        Manager::Launchd => plist(service),
    };
    let steps = commands(request.manager, &file, request.remove);
    let shown = |c: &Vec<String>| c.join(" ");
    let found = unit_files::find(&file, MARK)?;
    if found == Found::Theirs {
        return Err(format!(
            "{} was not written by memfold (it lacks the line {MARK:?}): move it aside first, or edit it by hand",
            file.display()
        ));
    }
    if request.dry_run {
        match request.remove {
            false => {
                println!("would write {}:\n{text}", file.display());
                if request.manager == Manager::Systemd && !service.env_file().exists() {
                    println!("would create {} (empty, 0600)", service.env_file().display());
                }
            }
            true => println!("would remove {}", file.display()),
        }
        if !request.no_start {
            for c in &steps {
                println!("would run: {}", shown(c));
            }
        }
        return Ok(0);
    }
    if request.remove {
        if !request.no_start && file.exists() {
            for c in &steps {
                execute(c)?;
            }
        }
        match unit_files::remove(&file)? {
            true => println!("removed {}", file.display()),
            false => println!("{}: not there", file.display()),
        }
        let env = service.env_file();
        if request.manager == Manager::Systemd && unit_files::is_empty(&env) {
            unit_files::remove(&env)?;
            println!("removed {} (it was empty)", env.display());
        } else if request.manager == Manager::Systemd && env.exists() {
            println!("kept {} (it holds your settings)", env.display());
        }
        return Ok(0);
    }
    if request.manager == Manager::Systemd && unit_files::create_private(&service.env_file())? {
        println!("created {} (empty, 0600: variables such as OPENAI_API_KEY go there)", service.env_file().display());
    }
    if found == Found::Ours(text.clone()) {
        println!("{}: unchanged", file.display());
    } else {
        unit_files::write(&file, &text)?;
        println!("wrote {}", file.display());
    }
    if request.no_start {
        for c in &steps {
            println!("to start it: {}", shown(c));
        }
        return Ok(0);
    }
    if request.manager == Manager::Launchd && matches!(found, Found::Ours(_)) {
        // Loaded from the file before: unloaded first, or bootstrap refuses it (and a
        // failure here means it was not loaded).
        let _ = execute(&commands(Manager::Launchd, &file, true)[0]);
    }
    for c in &steps {
        execute(c)?;
    }
    match request.manager {
        Manager::Systemd => println!(
            "memfold runs as a service (logs: journalctl --user -u memfold -f). To keep it running while you are \
             logged out: loginctl enable-linger \"$USER\""
        ),
        Manager::Launchd => println!("memfold runs as a service (logs: {})", service.log_file().display()),
    }
    Ok(0)
}

/// What `service start|stop|restart|status|logs` asks of the service manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    Start,
    Stop,
    Restart,
    Status,
    /// The last lines of its log, and with `follow` what comes after.
    Logs {
        follow: bool,
    },
}

/// The command that does `control` with `manager`.
pub fn control_command(service: &Service, manager: Manager, control: Control) -> Vec<String> {
    let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let target = format!("gui/{}/com.memfold", memfold_store::sys::access::user_id());
    let log = service.log_file().to_string_lossy().into_owned();
    match (manager, control) {
        (Manager::Systemd, Control::Start) => words(&["systemctl", "--user", "start", "memfold.service"]),
        (Manager::Systemd, Control::Stop) => words(&["systemctl", "--user", "stop", "memfold.service"]),
        (Manager::Systemd, Control::Restart) => words(&["systemctl", "--user", "restart", "memfold.service"]),
        (Manager::Systemd, Control::Status) => {
            words(&["systemctl", "--user", "status", "--no-pager", "memfold.service"])
        }
        (Manager::Systemd, Control::Logs { follow }) => {
            let mut c = words(&["journalctl", "--user", "-u", "memfold.service", "-n", "100", "--no-pager"]);
            if follow {
                c.push("--follow".into());
            }
            c
        }
        (Manager::Launchd, Control::Start) => words(&["launchctl", "kickstart", &target]),
        (Manager::Launchd, Control::Stop) => words(&["launchctl", "kill", "SIGTERM", &target]),
        (Manager::Launchd, Control::Restart) => words(&["launchctl", "kickstart", "-k", &target]),
        (Manager::Launchd, Control::Status) => words(&["launchctl", "print", &target]),
        (Manager::Launchd, Control::Logs { follow }) => match follow {
            true => words(&["tail", "-n", "100", "-f", &log]),
            false => words(&["tail", "-n", "100", &log]),
        },
    }
}

/// Run `control`, its output going to the person; its exit code is the command's.
pub fn control(service: &Service, manager: Manager, control: Control, dry_run: bool) -> Result<i32, String> {
    if !service.file(manager).exists() {
        return Err(format!(
            "memfold is not installed as a service here ({} is not there): `memfold service install` first",
            service.file(manager).display()
        ));
    }
    let command = control_command(service, manager, control);
    if dry_run {
        println!("would run: {}", command.join(" "));
        return Ok(0);
    }
    let status = Command::new(&command[0]).args(&command[1..]).status().map_err(|e| format!("{}: {e}", command[0]))?;
    Ok(status.code().unwrap_or(1))
}

/// Run one step; its failure names the command and what it said.
fn execute(command: &[String]) -> Result<(), String> {
    println!("running: {}", command.join(" "));
    let out = Command::new(&command[0])
        .args(&command[1..])
        .output()
        .map_err(|e| format!("{}: {e} (`--no-start` writes the file alone, for a system without it)", command[0]))?;
    if !out.status.success() {
        return Err(format!(
            "`{}` failed ({}): {}",
            command.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service() -> Service {
        Service {
            exe: PathBuf::from("/opt/mem fold/bin/memfold"),
            args: vec!["--home".into(), "/home/ana/.local/share/100%-memfold".into()],
            user_home: PathBuf::from("/home/ana"),
        }
    }

    #[test]
    fn the_unit_quotes_paths_and_escapes_systemds_specifiers() {
        let text = unit(&service());
        assert!(
            text.contains(
                "ExecStart=\"/opt/mem fold/bin/memfold\" \"--home\" \"/home/ana/.local/share/100%%-memfold\" \"serve\""
            ),
            "{text}"
        );
        assert!(text.contains(MARK));
    }

    #[test]
    fn the_plist_escapes_its_strings_and_names_absolute_paths() {
        let mut s = service();
        s.args[1] = "/Users/ana/a&b".into();
        s.user_home = PathBuf::from("/Users/ana");
        let text = plist(&s);
        assert!(text.contains("<string>/Users/ana/a&amp;b</string>"), "{text}");
        assert!(text.contains("<string>/Users/ana/Library/Logs/memfold.log</string>"), "{text}");
        assert!(!text.contains('~'));
    }
}
