//! The `memfold` binary: parse the command line, set up logging, run the command.

use std::io::IsTerminal;

use clap::Parser;
use tracing_subscriber::EnvFilter;

fn main() {
    // Whatever memfold creates (the index included) is for its owner only.
    memfold::doors::cli::private_umask();
    memfold::doors::cli::process_settings();
    let cli = memfold::doors::cli::Cli::parse();
    memfold::doors::cli::quiet_on_closed_pipe(&cli.command);
    // The daemon logs what it does; any other command prints its result on stdout, so by
    // default it logs only what a person should act on.
    let level = match cli.command {
        memfold::doors::cli::Command::Serve { .. } => "info",
        _ => "warn",
    };
    // lance warns of every empty IVF partition when it folds a few new rows into the vector
    // index ("partition N is empty, skipping"): expected with small deltas, nothing to act on.
    let filter = EnvFilter::try_from_env("MEMFOLD_LOG").unwrap_or_else(|_| {
        EnvFilter::new(format!(
            "{level},lance=warn,lance::index::vector::builder=error,lancedb=warn,datafusion=warn,lance_index=warn,rmcp=warn"
        ))
    });
    // Colours only on a terminal: under systemd/journald or in a pipe they would be noise.
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .with_target(false)
        .init();
    match memfold::doors::cli::run(cli) {
        Ok(code) => std::process::exit(code),
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::exit(2);
        }
    }
}
