//! Shell scripts written for Linux, run unmodified against tclab's policy store.
//!
//! A shaping script is a bash program: variables, `$[...]` and `$((...))` arithmetic, `\` continuations,
//! `case "$1" in start)`, and calls to `tc` and `iptables` — by bare name, by absolute path (`/sbin/tc`,
//! Entware's `/opt/sbin/tc`), or through a path built as it runs (`TC=/opt/sbin/tc; $TC qdisc add …`,
//! `"${PREFIX}/sbin/tc"`), in the script or in a file it sources. Rather than interpret shell, tclab lets
//! bash run the script and replaces the commands underneath it. A command is tclab's by its name (tc,
//! iptables, ip, ifconfig, modprobe… [`NAMES`]), whatever its directory:
//!
//! - bash sources `$BASH_ENV` before a non-interactive script, so a prelude placed there defines shell
//!   functions of these names, bare and under the usual directories ([`DIRS`]: `/sbin/tc`,
//!   `/usr/local/sbin/tc`, `/opt/sbin/tc`…); bash outside POSIX mode accepts slashes in function names
//!   and looks a command's expanded word up as a function before it looks at the file system. Each
//!   sends its words to the engine that runs the script (a [`crate::control::Server`] in the calling
//!   process: `tclab script run`, or the simulator loading a scenario) over a loopback port that bash
//!   opens by itself (`/dev/tcp`, with a random token), so a call starts no process and the simulator
//!   needs no tclab binary; the script sees tc's own output, messages and exit statuses, line by line.
//!   Nested scripts (`$0 stop`) inherit `BASH_ENV` and get the same functions.
//! - Any other path is caught as the script runs: the prelude's DEBUG trap (which `set -T` extends to
//!   functions, subshells and command substitutions) sees each simple command before bash expands it,
//!   expands its command word itself where that cannot act twice (`$TC`, `"${PREFIX}/sbin/tc"`,
//!   `${TC:-/sbin/tc}`, not `$(…)` or `${X?}`), and defines the function for a path whose last
//!   component is one of the names (`/jffs/bin/tc`, `./tc`), before bash looks the word up. The
//!   functions themselves run without the trap.
//! - A directory of wrapper executables (bash scripts that load the prelude and make the same call,
//!   named by how they are called: `$0`) goes first in `PATH`, for commands reached without the
//!   shell's function lookup (`xargs tc`, `find -exec tc`); `env`, `command` and `sudo` are shell
//!   functions that send these names, by any path, to tclab.
//! - Where a private mount namespace can be made (root and `unshare`, as in CI), the script runs in
//!   one in which the wrappers are at every path of these names in [`DIRS`] (a read-only overlay of
//!   each directory, added under `/opt` or `/usr/local` where the host has none) and bound over every
//!   other such file in `PATH` and every file they lead to, so that no spelling — `nohup /usr/sbin/tc`,
//!   `xargs /opt/sbin/tc`, `( exec tc … )` after the script resets PATH — reaches the host's traffic
//!   control or fails for want of a file. The host's file system is not changed.
//!
//! A script that sets a DEBUG trap of its own replaces the prelude's: paths other than those in
//! [`DIRS`] then reach tclab only through the mount namespace.
//! - `ip link set DEV mtu N txqueuelen N [up|down]` and `ifconfig DEV [mtu N] [txqueuelen N] [up|down]` become `tclab
//!   link set`; `ip link add NAME type ifb` and `ip link del NAME` become `tclab link add|del`;
//!   `modprobe ifb [numifbs=N]` (or OpenWrt's `insmod ifb …`) loads the module: it creates ifb0…ifbN-1
//!   (2 by default, as the module does) unless ifb devices exist already (the module is loaded: nothing
//!   happens); `modprobe -r ifb` and `rmmod ifb` unload it, deleting every ifb device whatever its name
//!   (and fail, as kmod's do, when none is loaded); `ip6tables` is refused (tclab's netfilter is IPv4); other `modprobe`, `insmod`,
//!   `rmmod` succeed silently (every qdisc is "built in"); `ethtool` goes to the engine ([`crate::store::ethtool`]):
//!   `-K DEV tso|gso|sg|tx on|off` (or ethtool's other names for them, [`crate::store::ETHTOOL_MODELLED`])
//!   is recorded as `link set dev DEV tso|gso|sg|tx …` (what `tclab check` reads of offloads, and whether a
//!   simulated veth takes GSO packets whole), its other features are noted with the script's line, a
//!   name ethtool does not know fails as ethtool does (exit 92) and is listed among the refusals;
//!   `-k DEV` prints the modelled features; `ip [-4] route add|change|
//!   replace|del … realm R` becomes `tclab route …` ([`crate::iproute`]: a `route` record, the realms
//!   the simulator gives its routes); other `ip` commands (`addr`, `rule`, …, a route without a realm),
//!   other `ethtool` calls and `sysctl -w` are reported on stderr and succeed without effect.
//!   Everything else is the real command.
//!
//! [`run_script`] runs a script against a fresh temporary store and returns the journal it left,
//! which the simulator replays into one node's engine (`script = "file.sh"` in a scenario).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

/// The commands tclab answers in a script, by the name they are called under, whatever the directory
/// (`tc`, `/sbin/tc`, `/opt/sbin/tc`, `$TC`): each has a shell function and a wrapper executable.
pub(crate) const NAMES: &[&str] = &[
    "tc",
    "iptables",
    "iptables-legacy",
    "iptables-nft",
    "ip6tables",
    "ip",
    "ifconfig",
    "modprobe",
    "insmod",
    "rmmod",
    "sysctl",
    "ethtool",
];
/// Where scripts name them by path: the system's directories, /usr/local's, and Entware's under /opt
/// (asuswrt-merlin's add-ons and OpenWrt's extroot call `/opt/sbin/tc`, `/opt/bin/ip`). Functions of
/// these paths are defined before the script starts, and with a private mount namespace the wrappers
/// are placed at them, where the host lacks them too. A path in any other directory, or built as the
/// script runs, gets its function when the script is about to run it (`__tclab_debug`).
pub(crate) const DIRS: &[&str] = &[
    "/sbin",
    "/usr/sbin",
    "/bin",
    "/usr/bin",
    "/usr/local/sbin",
    "/usr/local/bin",
    "/opt/sbin",
    "/opt/bin",
    "/opt/usr/sbin",
    "/opt/usr/bin",
];

/// What `tclab script run --help` says about the commands it replaces.
pub const HELP: &str = "Usage: tclab script run [--strict] FILE [ARGS…]

Runs a shell script written for Linux, unmodified, under bash, against the stored policy ($TCLAB_STATE).
At the end it reports on stderr how many changes applied and, for each one refused, the script's line, the
command and tc's message, even where the script sent tc's errors to /dev/null.
  --strict   a refused change (other than deleting something that was not there) is fatal: the exit
             status is non-zero and nothing is stored; the store is locked for the script's duration.
Inside the script, a command is tclab's by its name, whatever its directory (/sbin/tc, Entware's
/opt/sbin/tc, \"$PREFIX/sbin/tc\" or $TC built as the script runs, in files it sources too):
  tc, /sbin/tc, /opt/sbin/tc, $TC …            -> tclab tc …
  iptables, /sbin/iptables, iptables-legacy …  -> tclab iptables … (mangle table only)
  ip6tables                                    -> refused (exit 1): tclab's netfilter is IPv4
  ip link set [dev] DEV mtu N txqueuelen N up -> tclab link set dev DEV …
  ip link add NAME type ifb, ip link del NAME  -> tclab link add|del dev NAME …
  modprobe ifb [numifbs=N], insmod ifb …      -> creates ifb0 … ifbN-1 (default 2) unless loaded
  modprobe -r ifb, rmmod ifb                   -> deletes every ifb device (exit 1 if none)
  ifconfig DEV [mtu N] [txqueuelen N] [up|down] -> tclab link set dev DEV …
  other modprobe, insmod, rmmod                -> succeed silently (everything is built in)
  ethtool -K DEV tso off gso off …             -> tclab link set dev DEV tso off gso off (also by
                                                  ethtool's long names: tx-tcp-segmentation …; sg off
                                                  and tx off turn TSO/GSO off as on Linux)
  ethtool -s DEV speed N …                     -> tclab link set dev DEV speed N (taprio, cbs)
  ip [-4] route add|change|replace|del … realm R -> tclab route … (the routes' realms)
  ethtool -k DEV                               -> the features tclab models, as ethtool prints them
  other ip commands (addr, rule …, a route without a realm), sysctl, other ethtool
                                               -> noted on stderr, succeed without effect
  sudo CMD …                                   -> CMD …
Everything else (echo, sleep, grep …) runs as usual. The script's exit status is tclab's.
Programs the script starts that are not bash (xargs, nohup, timeout, exec, sh -c) find tclab's
wrappers first in PATH. As root, the script also runs in a private mount namespace where every file
of these names in /sbin, /bin, /usr/sbin, /usr/bin, /usr/local/{sbin,bin}, /opt/{sbin,bin},
/opt/usr/{sbin,bin} (added where the host has none, if /opt or /usr/local exists) and in PATH is a
wrapper: `xargs /opt/sbin/tc` reaches tclab too, and nothing reaches the host's tc. The host's files are
not changed. Without root there is no such namespace: such a program naming a path runs the file there.";

pub(crate) fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `__tclab_call TOOL ARGS…`: one call to tclab (`tc`, `iptables` or `link`), made by bash itself on the
/// script server's loopback port (`/dev/tcp`), so that a script's thousand `tc` lines start no process
/// at all. The request is NUL-separated words (see [`crate::control`]); the answer is the exit code,
/// stdout and stderr, printed as tc printed them. `tc -batch FILE|-` sends the batch itself. Safe under
/// the script's `set -e`, `set -u` and `set -x` (the token is not traced). Where bash cannot reach the
/// port, a `tclab` executable, if one was named, answers instead.
const CALL: &str = r#"__tclab_call() {
  { local -; set +x; } 2>/dev/null
  local tool="$1"; shift
  local args=("$@") input= has=0 i f why fd= in= code= out= err= how= n=
  __tclab_caller
  if [ "$tool" = tc ]; then
    for ((i = 0; i < ${#args[@]}; i++)); do
      case "${args[i]}" in
        -b|-batch|--batch)
          f="${args[i+1]-}"
          [ -n "$f" ] || break
          if [ "$f" = - ]; then
            IFS= builtin read -r -d '' input || :
          elif { exec {in}<"$f"; } 2>/dev/null; then
            IFS= builtin read -r -d '' input <&"$in" 2>/dev/null || :
            exec {in}<&-
          else
            if [ -e "$f" ]; then why="Permission denied"; else why="No such file or directory"; fi
            builtin printf 'Cannot open file "%s" for reading: %s\n' "$f" "$why" >&2
            return 1
          fi
          has=1
          break ;;
      esac
    done
  fi
  if [ -n "${TCLAB_SCRIPT_PORT-}" ] && ! { exec {fd}<>"/dev/tcp/127.0.0.1/$TCLAB_SCRIPT_PORT"; } 2>/dev/null; then
    fd=
    if [ -n "${TCLAB_CONTROL-}" ] && ! [ -S "$TCLAB_CONTROL" ]; then
      # The script's engine is gone: a job the script left running after it ended. Nothing may be
      # applied behind the report's back.
      builtin echo "tclab: $tool: the script has ended; this call was not applied" >&2
      return 1
    fi
    # No loopback here (`unshare -n`): a tclab process reaches the engine on its Unix socket.
  fi
  if [ -z "$fd" ]; then
    if [ -n "${TCLAB_EXE-}" ]; then
      if [ $has = 1 ]; then
        builtin printf '%s' "$input" | TCLAB_CALLER="$__TCLAB_AT" "$TCLAB_EXE" "$tool" "${args[@]}"
      else
        TCLAB_CALLER="$__TCLAB_AT" "$TCLAB_EXE" "$tool" "${args[@]}"
      fi
      return
    fi
    builtin echo "tclab: $tool: cannot reach tclab's engine (no loopback interface, or the script's environment lost it)" >&2
    return 1
  fi
  builtin printf '%s\0' "${TCLAB_SCRIPT_TOKEN-}" "${TCLAB_STATE-}" "$__TCLAB_AT" "$((${#args[@]} + 1))" "$tool" "${args[@]}" "$has" "$input" >&"$fd"
  IFS= builtin read -r -d '' code <&"$fd" || :
  # A long answer streams: bash reads a socket a byte at a time, head and cat in blocks.
  IFS= builtin read -r -d '' how <&"$fd" || :
  if [ "$how" = s ]; then
    IFS= builtin read -r -d '' n <&"$fd" || :
    builtin command head -c "$n" <&"$fd" >&2 || :
  else
    IFS= builtin read -r -d '' err <&"$fd" || :
  fi
  IFS= builtin read -r -d '' how <&"$fd" || :
  if [ "$how" = s ]; then
    builtin command cat <&"$fd" || :
  else
    IFS= builtin read -r -d '' out <&"$fd" || :
    [ -z "$out" ] || builtin printf '%s' "$out"
  fi
  exec {fd}>&-
  [ -z "$err" ] || builtin printf '%s' "$err" >&2
  case "$code" in
    ''|*[!0-9]*) builtin echo "tclab: $tool: the control channel did not answer" >&2; return 1 ;;
  esac
  return "$code"
}
# Where a script finds NAME (`command -v`, `which`): a path that is a file, as on Linux, and that bash
# resolves to tclab's function when the script calls it (`TC=$(command -v tc); $TC …`) — so the call
# stays in this process and the report names the script's line.
__tclab_where() {
  local n="${1##*/}" d
  for d in /usr/sbin /sbin /usr/bin /bin; do
    if [ -x "$d/$n" ] && builtin declare -F "$d/$n" >/dev/null; then builtin echo "$d/$n"; return 0; fi
  done
  builtin echo "${TCLAB_WRAPPERS:-/usr/sbin}/$n"
}
which() {
  local a rc=0
  for a in "$@"; do
    case "$a" in -*) continue ;; esac
    if __tclab_ours "$a"; then __tclab_where "$a"; else builtin command which "$a" || rc=$?; fi
  done
  return $rc
}
__tclab_ours() {
  case "${1##*/}" in
    @NAMES@) return 0 ;;
    *) return 1 ;;
  esac
}
# Before each simple command (the DEBUG trap; `set -T` gives it to functions, subshells and command
# substitutions too): when the command word is a path to a command tclab answers, literal
# (`/opt/sbin/tc`) or built as the script runs (`$TC`, `"${PREFIX}/sbin/tc"`, `${TC:-/sbin/tc}`), a
# function of that name is defined, which bash then calls: it looks functions up by the expanded word
# before it looks at the file system. The word is expanded here as bash is about to expand it, unless
# that could act twice (command substitution, arithmetic, `${X?}`, `${a[i++]}`, `${X@P}`): such a
# word is left alone.
__tclab_debug() {
  case "$BASH_COMMAND" in *[/\$\"\'\\=]*) ;; *) return 0 ;; esac
  local c="$BASH_COMMAND" w
  # Assignments before the command (`LC_ALL=C $TC …`) are not its name.
  while :; do
    w="${c%%[[:space:]]*}"
    case "$w" in [A-Za-z_]*=*) ;; *) break ;; esac
    case "${w%%=*}" in *[!A-Za-z0-9_]*) break ;; esac
    case "$w" in *[\"\'\\]*) return 0 ;; esac
    c="${c#"$w"}"
    c="${c#"${c%%[![:space:]]*}"}"
  done
  case "$w" in */*|*\$*|*[\"\'\\]*) ;; *) return 0 ;; esac
  case "$w" in *[\(\`\[\?@]*) return 0 ;; esac
  local -
  set +eu -f
  local v=()
  builtin eval "v=($w)" || return 0
  [ ${#v[@]} -eq 0 ] || __tclab_cover "${v[0]}"
  return 0
}
# PATH, if it names a command tclab answers, calls tclab: a function of that name (a name bash can
# take: letters, digits and `._/+-`).
__tclab_cover() {
  case "$1" in */*) ;; *) return 0 ;; esac
  case "$1" in *[!A-Za-z0-9._/+-]*) return 0 ;; esac
  __tclab_ours "$1" || return 0
  builtin declare -F -- "$1" >/dev/null && return 0
  builtin eval "function $1 { @BODY@; }"
}
# NAME ARGS: what the function for NAME does, without looking NAME up again (a script's own `tc()`
# wrapper that calls `command tc` or `sudo tc` must reach tclab, not itself).
__tclab_run() {
  local name="${1##*/}"; shift
  case "$name" in
    tc) __tclab_call tc "$@" || return ;;
    iptables|iptables-legacy|iptables-nft) __tclab_call iptables "$@" || return ;;
    ip6tables) builtin echo "ip6tables: not supported by tclab (its netfilter is IPv4 only)" >&2; return 1 ;;
    ip) __tclab_ip "$@" || return ;;
    ifconfig) __tclab_ifconfig "$@" || return ;;
    modprobe|insmod|rmmod) __tclab_modprobe "$name" "$@" || return ;;
    ethtool) __tclab_call ethtool "$@" || return ;;
    sysctl) builtin echo "tclab script: ignoring \"sysctl $*\"" >&2; return 0 ;;
  esac
}
command() {
  # `command -v tc` names a file, as it does on Linux: the wrapper first in PATH.
  if [ "${1-}" = -v ] && [ $# -eq 2 ] && __tclab_ours "$2"; then
    __tclab_where "$2"
    return 0
  fi
  if [ $# -gt 0 ] && [ "${1#-}" = "$1" ] && __tclab_ours "$1"; then
    __tclab_run "$@" || return
    return
  fi
  builtin command "$@"
}
sudo() {
  local assigns=()
  while [ $# -gt 0 ]; do
    case "$1" in
      -u|-g|-C|-p|-U|-r|-t|-D|-R|-T) shift 2 ;;
      --) shift; break ;;
      -*) shift ;;
      *=*) assigns+=("$1"); shift ;;
      *) break ;;
    esac
  done
  # sudo runs a program, never a shell function of the script's; `VAR=x` is the program's alone.
  if [ ${#assigns[@]} -gt 0 ]; then
    ( export "${assigns[@]}"; command "$@" ) || return
  else
    command "$@" || return
  fi
}
"#;

/// The prelude bash sources before the script (`BASH_ENV`).
fn prelude() -> String {
    let mut p = String::from(
        "# tclab script prelude: tc and iptables are tclab's.\n\
         __tclab_caller() {\n\
         \x20 local i\n\
         \x20 for ((i = 1; i < ${#BASH_SOURCE[@]}; i++)); do\n\
         \x20   case \"${BASH_SOURCE[$i]}\" in\n\
         \x20     \"$BASH_ENV\"|\"${TCLAB_WRAPPERS:-/nonexistent}\"/*) ;;\n\
         \x20     *) __TCLAB_AT=\"${BASH_SOURCE[$i]}:${BASH_LINENO[$((i - 1))]}\"; return ;;\n\
         \x20   esac\n\
         \x20 done\n\
         \x20 __TCLAB_AT=\"${TCLAB_CALLER:-?}\"\n\
         }\n\
         __tclab_ip() {\n\
         \x20 local a=\"$*\"\n\
         \x20 if [ $# -eq 0 ]; then echo 'Usage: ip [ OPTIONS ] OBJECT { COMMAND | help }' >&2; return 255; fi\n\
         \x20 while [ $# -gt 0 ]; do case \"$1\" in -4) shift ;; -f|-family) [ \"${2-}\" = inet ] || break; shift 2 ;; *) break ;; esac; done\n\
         \x20 case \"${1-}\" in\n\
         \x20   route|r|ro|rou|rout) shift; __tclab_call route \"$@\" || return ;;\n\
         \x20   link|l|li|lin)\n\
         \x20     shift\n\
         \x20     case \"${1-}\" in\n\
         \x20       set|s|se) shift; __tclab_call link set \"$@\" || return ;;\n\
         \x20       add|a|ad|delete|del|d|de) local op=add; case \"$1\" in d*) op=del ;; esac; shift; if [ $op = add ]; then case \" $* \" in *\" type \"*) ;; *) echo 'Not enough information: \"type\" argument is required' >&2; return 1 ;; esac; fi; __tclab_call link $op \"$@\" || return ;;\n\
         \x20       show|sh|list|ls|'') [ $# -gt 0 ] && shift; __tclab_call link show \"$@\" || return ;;\n\
         \x20       *) echo \"tclab script: ignoring \\\"ip $a\\\"\" >&2; return 0 ;;\n\
         \x20     esac ;;\n\
         \x20   *) echo \"tclab script: ignoring \\\"ip $a\\\"\" >&2; return 0 ;;\n\
         \x20 esac\n\
         }\n\
         __tclab_modprobe() {\n\
         \x20 local caller=\"${1##*/}\"; shift\n\
         \x20 local n=2 a ifb=0 i remove=0 loaded\n\
         \x20 case \"$caller\" in modprobe|insmod) ;; rmmod) remove=1 ;; *) return 0 ;; esac\n\
         \x20 for a in \"$@\"; do\n\
         \x20   case \"$a\" in\n\
         \x20     -r|--remove) remove=1 ;;\n\
         \x20     ifb) ifb=1 ;;\n\
         \x20     numifbs=*) n=\"${a#numifbs=}\" ;;\n\
         \x20   esac\n\
         \x20 done\n\
         \x20 [ $ifb = 1 ] || return 0\n\
         \x20 loaded=$(__tclab_call link show type ifb 2>/dev/null | sed -n 's/^[0-9]*: \\([^:]*\\): .*/\\1/p')\n\
         \x20 if [ $remove = 1 ]; then\n\
         \x20   if [ -z \"$loaded\" ]; then\n\
         \x20     if [ \"$caller\" = rmmod ]; then echo 'rmmod: ERROR: Module ifb is not currently loaded' >&2; else echo 'modprobe: FATAL: Module ifb is not in kernel.' >&2; fi\n\
         \x20     return 1\n\
         \x20   fi\n\
         \x20   for i in $loaded; do __tclab_call link del dev \"$i\" 2>/dev/null || :; done\n\
         \x20   return 0\n\
         \x20 fi\n\
         \x20 [ -z \"$loaded\" ] || return 0\n\
         \x20 for ((i = 0; i < n; i++)); do __tclab_call link add dev \"ifb$i\" type ifb 2>/dev/null || :; done\n\
         \x20 return 0\n\
         }\n\
         __tclab_ifconfig() {\n\
         \x20 if [ $# -le 1 ]; then echo \"tclab script: ignoring \\\"ifconfig $*\\\"\" >&2; return 0; fi\n\
         \x20 local dev=\"$1\"; shift\n\
         \x20 local args=()\n\
         \x20 while [ $# -gt 0 ]; do\n\
         \x20   case \"$1\" in\n\
         \x20     mtu|txqueuelen) if [ $# -lt 2 ]; then echo \"ifconfig: $1: missing value\" >&2; return 1; fi; args+=(\"$1\" \"$2\"); shift 2 ;;\n\
         \x20     up|down) args+=(\"$1\"); shift ;;\n\
         \x20     *) echo \"tclab script: ignoring ifconfig option \\\"$1\\\"\" >&2; shift ;;\n\
         \x20   esac\n\
         \x20 done\n\
         \x20 __tclab_call link set dev \"$dev\" \"${args[@]}\" || return\n\
         }\n\
         env() {\n\
         \x20 local assigns=() t\n\
         \x20 while [ $# -gt 0 ]; do\n\
         \x20   case \"$1\" in\n\
         \x20     -u|-C|-S) assigns+=(\"$1\" \"$2\"); shift 2 ;;\n\
         \x20     -*|*=*) assigns+=(\"$1\"); shift ;;\n\
         \x20     *) break ;;\n\
         \x20   esac\n\
         \x20 done\n\
         \x20 if [ $# -gt 0 ] && __tclab_ours \"$1\"; then t=\"${1##*/}\"; shift; __tclab_caller; builtin command env \"${assigns[@]}\" TCLAB_CALLER=\"$__TCLAB_AT\" \"$TCLAB_WRAPPERS/$t\" \"$@\" || return; return 0; fi\n\
         \x20 builtin command env \"${assigns[@]}\" \"$@\"\n\
         }\n",
    );
    p.push_str(
        &CALL
            .replace("@NAMES@", &NAMES.join("|"))
            .replace("@BODY@", &escape_for_double_quotes(BODY)),
    );
    // The functions, by bare name and by the paths in DIRS; other paths get theirs as the script runs.
    for n in NAMES {
        for d in std::iter::once("").chain(DIRS.iter().copied()) {
            let sep = if d.is_empty() { "" } else { "/" };
            p.push_str(&format!("function {d}{sep}{n} {{ {BODY}; }}\n"));
        }
    }
    // `$_` stays the script's (the trap's last word is its old value). The trap's own commands are not
    // traced (`set -x`): their stderr is closed.
    p.push_str("set -T\ntrap '{ __tclab_debug \"$_\"; } 2>&-' DEBUG\n");
    p
}

/// The body of every function that answers a command: the call runs without the DEBUG trap (`set +T`
/// until it returns; a function entered so runs none), then does what the name says. `CALL || return`,
/// never a bare failing call as a function's last command: under the script's `set -e` that would exit
/// inside the function, where the script's `trap … ERR` (not inherited by functions) never runs;
/// returned, the failure happens in the script's own context, as a failing program's would.
const BODY: &str = r#"{ local -; set +Tx; } 2>&-; __tclab_run "${FUNCNAME[0]}" "$@" || return"#;

/// `text` as it must be written between double quotes for bash to read it back unchanged.
fn escape_for_double_quotes(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if matches!(c, '\\' | '"' | '$' | '`') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Remove the scratch directories of tclab processes that are gone (killed by a signal, which skips
/// the directory's removal on drop): `tclab-script-PID-N` whose PID no longer runs.
fn remove_orphans() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("tclab-script-"))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, n)| n.parse::<u64>().ok().and(pid.parse::<u32>().ok()))
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// The mount points of this process's namespace (`/proc/self/mountinfo`'s fifth field, its `\040`
/// escapes undone).
fn mount_points() -> Vec<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|m| {
            let (b, mut out, mut i) = (m.as_bytes(), Vec::new(), 0);
            while i < b.len() {
                let octal = b
                    .get(i + 1..i + 4)
                    .filter(|o| o.iter().all(|c| (b'0'..=b'7').contains(c)));
                match (b[i], octal) {
                    (b'\\', Some(o)) => {
                        out.push(o.iter().fold(0u8, |v, c| v.wrapping_mul(8) + (c - b'0')));
                        i += 4;
                    }
                    (c, _) => {
                        out.push(c);
                        i += 1;
                    }
                }
            }
            #[cfg(unix)]
            let p =
                PathBuf::from(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&out));
            #[cfg(not(unix))]
            let p = PathBuf::from(String::from_utf8_lossy(&out).into_owned());
            p
        })
        .collect()
}

/// A scratch directory with the prelude and the wrapper executables; removed on drop.
pub struct Sandbox {
    pub dir: PathBuf,
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

impl Sandbox {
    pub fn new() -> Result<Sandbox, String> {
        remove_orphans();
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("tclab-script-{}-{n}", std::process::id()));
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).map_err(|e| format!("{}: {e}", bin.display()))?;
        #[cfg(unix)]
        {
            // The control socket lives here: only the caller may reach it.
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        let sb = Sandbox { dir };
        std::fs::write(sb.prelude(), prelude()).map_err(|e| e.to_string())?;
        // Wrapper executables for callers that bypass shell functions (env, xargs, find -exec).
        // They load the prelude themselves (an `env -i` may have dropped BASH_ENV), then make the call.
        // Named by how they were called (`$0`): one bound over `/usr/bin/kmod` answers as `rmmod` when
        // called as rmmod.
        let call = || {
            let prelude = quote(&sb.prelude().to_string_lossy());
            format!(
                "#!/bin/bash\n\
                 [ -r {prelude} ] || {{ echo \"tclab: ${{0##*/}}: the script has ended; this call was not applied\" >&2; exit 1; }}\n\
                 . {prelude}\n__tclab_run \"${{0##*/}}\" \"$@\"\n"
            )
        };
        let wrappers = NAMES.iter().map(|n| (*n, call()));
        for (name, text) in wrappers {
            let path = bin.join(name);
            std::fs::write(&path, text).map_err(|e| e.to_string())?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                    .map_err(|e| e.to_string())?;
            }
        }
        Ok(sb)
    }

    pub fn prelude(&self) -> PathBuf {
        self.dir.join("prelude.bash")
    }

    /// The shell lines that, in a private mount namespace, put a wrapper at every path where a child of
    /// the script that is not bash (`xargs`, `nohup`, `exec`, `sh -c`) may find one of [`NAMES`]; `None`
    /// where no such namespace can be made (not root).
    ///
    /// Each directory of [`DIRS`] is overlaid, read-only, with a layer holding every name: what the host
    /// has there is hidden, what it lacks is added (`/opt/sbin/tc` on a host without Entware: the overlay
    /// is of `/opt`, the nearest directory that exists; not of `/`, nor of a directory with mounts
    /// beneath it, which an overlay would hide). Every other file with such a name in [`DIRS`] or `PATH`,
    /// and every file such a name leads to (`/usr/sbin/iptables` → `xtables-legacy-multi`), has a wrapper
    /// bound over it; so does each file an overlay would have hidden, if the overlay cannot be made.
    /// Nothing of the host's file system changes: the mounts live and die with the namespace.
    fn covering_mounts(&self) -> Option<String> {
        static USABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        let usable = *USABLE.get_or_init(|| {
            Command::new("unshare")
                .args(["--mount", "--propagation", "private", "--", "true"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        });
        if !usable {
            return None;
        }
        let bin = self.dir.join("bin");
        let mounted = mount_points();
        // Overlays: a directory that exists → the directories under it (itself: "") to fill.
        let mut overlays: Vec<(PathBuf, Vec<PathBuf>)> = Vec::new();
        for d in DIRS {
            let (mut at, mut rel) = (PathBuf::from(d), PathBuf::new());
            while !at.is_dir() {
                let (Some(parent), Some(name)) = (at.parent(), at.file_name()) else {
                    break;
                };
                rel = Path::new(name).join(rel);
                at = parent.to_path_buf();
            }
            let Ok(target) = std::fs::canonicalize(&at) else {
                continue;
            };
            let usable = target.parent().is_some()
                && !mounted
                    .iter()
                    .any(|m| m != &target && m.starts_with(&target))
                && ![&target, &bin]
                    .iter()
                    .any(|p| p.to_string_lossy().contains([',', ':', '\\']));
            if !usable {
                continue;
            }
            match overlays.iter_mut().find(|(t, _)| *t == target) {
                Some((_, rels)) if !rels.contains(&rel) => rels.push(rel),
                Some(_) => {}
                None => overlays.push((target, vec![rel])),
            }
        }
        // The binds, and those each overlay stands in for.
        let bind = |real: &Path| {
            format!(
                "mount --bind {} {}",
                quote(&bin.join("tc").to_string_lossy()),
                quote(&real.to_string_lossy())
            )
        };
        let mut binds: Vec<PathBuf> = Vec::new();
        let mut instead: Vec<Vec<PathBuf>> = vec![Vec::new(); overlays.len()];
        let path = std::env::var_os("PATH").unwrap_or_default();
        let dirs = DIRS
            .iter()
            .map(PathBuf::from)
            .chain(std::env::split_paths(&path));
        for dir in dirs {
            for n in NAMES {
                let Ok(real) = std::fs::canonicalize(dir.join(n)) else {
                    continue;
                };
                if !real.is_file()
                    || binds.contains(&real)
                    || instead.iter().flatten().any(|p| *p == real)
                {
                    continue;
                }
                let hidden = overlays.iter().position(|(target, rels)| {
                    rels.iter().any(|r| real.parent() == Some(&*target.join(r)))
                        && real
                            .file_name()
                            .is_some_and(|f| NAMES.iter().any(|n| f == *n))
                });
                match hidden {
                    Some(i) => instead[i].push(real),
                    None => binds.push(real),
                }
            }
        }
        let mut setup = String::new();
        for (i, (target, rels)) in overlays.iter().enumerate() {
            let layer = self.dir.join("layers").join(i.to_string());
            for rel in rels {
                let d = layer.join(rel);
                if std::fs::create_dir_all(&d).is_err() {
                    return None;
                }
                for n in NAMES {
                    #[cfg(unix)]
                    if std::os::unix::fs::symlink(bin.join(n), d.join(n)).is_err() {
                        return None;
                    }
                }
            }
            let mut fallback: Vec<String> = instead[i].iter().map(|r| bind(r)).collect();
            fallback.push(":".into());
            setup.push_str(&format!(
                "mount -t overlay -o ro,lowerdir={}:{} tclab {} 2>/dev/null || {{ {}; }} || exit 126\n",
                quote(&layer.to_string_lossy()),
                quote(&target.to_string_lossy()),
                quote(&target.to_string_lossy()),
                fallback.join(" && ")
            ));
        }
        for real in binds {
            setup.push_str(&format!("{} || exit 126\n", bind(&real)));
        }
        // bash makes a script's redirections itself, so `echo 1 > /proc/sys/net/ipv4/ip_forward` or
        // `echo 100 > /sys/class/net/eth0/tx_queue_len` would change the host's kernel; read-only
        // here, such a write fails (EROFS) and the host stays as it was. /sys is bound without its
        // submounts, so a cgroup made under /sys/fs/cgroup fails too. (`sysctl -w`, a command, is
        // tclab's and ignored.)
        setup.push_str("mount --bind -o ro /proc/sys /proc/sys || exit 126\n");
        setup.push_str("mount --bind -o ro /sys /sys || exit 126\n");
        Some(setup)
    }

    /// `bash SCRIPT ARGS…` with the prelude, the wrappers first in PATH, and the store and executable named.
    ///
    /// Where a private mount namespace can be made (root, `unshare`), the wrappers are also at every path
    /// of the names in it ([`Sandbox::covering_mounts`]), so that no spelling of a call — `nohup /sbin/tc`,
    /// `xargs /opt/sbin/tc` after the script resets PATH, `exec tc` — can reach the host's traffic
    /// control. Without one, the shell functions (by any path bash runs) and the PATH wrappers (by bare
    /// name) are the guard.
    pub fn command(
        &self,
        exe: Option<&Path>,
        script: &Path,
        args: &[String],
        state: &Path,
    ) -> Command {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut paths = vec![self.dir.join("bin")];
        paths.extend(std::env::split_paths(&path));
        // `#!/bin/bash -e`: Linux gives bash what follows the interpreter as one argument.
        let options = shebang_options(script);
        let mut c = match self.covering_mounts() {
            Some(setup) => {
                let mut c = Command::new("unshare");
                let options: Vec<String> = options.iter().map(|o| quote(o)).collect();
                c.args(["--mount", "--propagation", "private", "--", "bash", "-c"])
                    .arg(format!(
                        "{setup}exec bash {} \"$0\" \"$@\"",
                        options.join(" ")
                    ));
                c
            }
            None => {
                let mut c = Command::new("bash");
                c.args(options);
                c
            }
        };
        // If tclab dies, the script dies with it rather than go on writing the store unwatched.
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::process::CommandExt;
            extern "C" {
                fn prctl(option: i32, ...) -> i32;
            }
            const PR_SET_PDEATHSIG: i32 = 1;
            const SIGKILL: i32 = 9;
            // SAFETY: prctl(PR_SET_PDEATHSIG) only sets a flag of the new process; it allocates nothing
            // and is async-signal-safe, as pre_exec requires.
            unsafe {
                c.pre_exec(|| {
                    prctl(PR_SET_PDEATHSIG, SIGKILL);
                    Ok(())
                });
            }
        }
        c.arg(script)
            .args(args)
            .env("BASH_ENV", self.prelude())
            .env("PATH", std::env::join_paths(paths).unwrap_or(path))
            .env("TCLAB_WRAPPERS", self.dir.join("bin"))
            .env("TCLAB_STATE", state)
            .env_remove("POSIXLY_CORRECT");
        match exe {
            Some(exe) => c.env("TCLAB_EXE", exe),
            None => c.env_remove("TCLAB_EXE"),
        };
        c
    }
}

/// The options a script's `#!` line gives bash or sh: `#!/bin/bash -e` → `-e` (Linux passes everything
/// after the interpreter's path as one word), `#!/usr/bin/env -S bash -e -u` → `-e`, `-u` (env splits).
fn shebang_options(script: &Path) -> Vec<String> {
    let mut first = [0u8; 256];
    let Some(n) = std::fs::File::open(script)
        .ok()
        .and_then(|mut f| std::io::Read::read(&mut f, &mut first).ok())
    else {
        return Vec::new();
    };
    let Some(line) = std::str::from_utf8(&first[..n])
        .ok()
        .and_then(|t| t.lines().next())
        .and_then(|l| l.strip_prefix("#!"))
    else {
        return Vec::new();
    };
    let Some((interpreter, rest)) = line.trim().split_once([' ', '\t']) else {
        return Vec::new();
    };
    let is_shell = |path: &str| matches!(path.rsplit('/').next(), Some("bash" | "sh"));
    let rest = rest.trim();
    if is_shell(interpreter) && rest.starts_with('-') {
        return vec![rest.to_string()];
    }
    if interpreter.rsplit('/').next() == Some("env") {
        if let Some(split) = rest.strip_prefix("-S") {
            let mut words = split.split_whitespace();
            if words.next().is_some_and(is_shell) {
                return words
                    .take_while(|w| w.starts_with('-'))
                    .map(str::to_string)
                    .collect();
            }
        }
    }
    Vec::new()
}

/// Run `script` with `args` and extra environment `env` against a fresh, empty store, its tc and iptables
/// answered by an engine in this process (the shell functions reach it by themselves; `exe`, the `tclab`
/// binary if there is one, answers only where bash cannot reach it), and return the journal the
/// script left: the accepted `tc`, `link` and `iptables` lines, in order, ready for
/// [`crate::store::replay`], with the report of what was refused and how the script ended. Commands the
/// script ran that failed (as `tc qdisc del … 2>/dev/null` on a clean device) are not in the journal, as
/// on Linux they changed nothing.
pub fn run_script(
    exe: Option<&Path>,
    script: &Path,
    args: &[String],
    env: &[(String, String)],
) -> Result<ScriptRun, String> {
    run_script_on(exe, script, args, env, &[])
}

/// [`run_script`] on a host that `setup`'s records (`link add dev eth1 numtxqueues 4`) made first: they
/// open the journal the script leaves.
pub fn run_script_on(
    exe: Option<&Path>,
    script: &Path,
    args: &[String],
    env: &[(String, String)],
    setup: &[Vec<String>],
) -> Result<ScriptRun, String> {
    if !script.is_file() {
        return Err(format!("{}: no such script", script.display()));
    }
    let sb = Sandbox::new()?;
    let state = sb.dir.join("policy.json");
    if !setup.is_empty() {
        crate::store::write_journal(&state, setup)?;
    }
    let limit = std::env::var("TCLAB_SCRIPT_TIMEOUT")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(SCRIPT_TIME_LIMIT, std::time::Duration::from_secs);
    let server = crate::control::Server::start_for_script(&state, &sb.dir)?;
    let mut env = env.to_vec();
    env.extend(server.environment());
    let run = run_bounded(&sb, exe, script, args, &env, &state, limit)?;
    let report = server.finish();
    let journal = crate::store::read_journal(&state)?;
    Ok(ScriptRun {
        journal: journal.entries,
        stderr: run.stderr,
        report,
        success: run.success,
        status: run.status,
    })
}

/// [`run_script`], for a caller that needs the script to succeed: a non-zero exit is an error carrying
/// its stderr.
pub fn run_script_to_journal(
    exe: Option<&Path>,
    script: &Path,
    args: &[String],
    env: &[(String, String)],
) -> Result<ScriptRun, String> {
    let run = run_script(exe, script, args, env)?;
    if !run.success {
        return Err(format!(
            "{} {}: {}",
            script.display(),
            run.status,
            run.stderr.trim_end()
        ));
    }
    Ok(run)
}

/// How long a policy script may run before it is stopped (shaping scripts take well under a second);
/// `TCLAB_SCRIPT_TIMEOUT=SECONDS` changes it.
pub const SCRIPT_TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// What a policy script left: its journal, and what it printed on stderr (tc's refusals and warnings),
/// which the caller should pass on even when the script succeeded.
pub struct ScriptRun {
    pub journal: Vec<Vec<String>>,
    pub stderr: String,
    /// What the script's calls did: changes applied, and each refusal with its script line.
    pub report: crate::control::Report,
    pub success: bool,
    /// `exited with N`, or that it was stopped.
    pub status: String,
}

struct Bounded {
    success: bool,
    status: String,
    stderr: String,
}

/// Run the script in its own process group with its output in files (a background job it leaves behind
/// cannot hold a pipe open), wait at most `limit`, then kill the whole group, the script's leftovers
/// included.
fn run_bounded(
    sb: &Sandbox,
    exe: Option<&Path>,
    script: &Path,
    args: &[String],
    env: &[(String, String)],
    state: &Path,
    limit: std::time::Duration,
) -> Result<Bounded, String> {
    let out_path = sb.dir.join("stdout.txt");
    let err_path = sb.dir.join("stderr.txt");
    let file = |p: &Path| std::fs::File::create(p).map_err(|e| format!("{}: {e}", p.display()));
    let mut cmd = sb.command(exe, script, args, state);
    for (k, v) in env {
        cmd.env(k, v);
    }
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(file(&out_path)?)
        .stderr(file(&err_path)?)
        .spawn()
        .map_err(|e| format!("cannot run bash: {e}"))?;
    let started = std::time::Instant::now();
    let status = loop {
        match child.try_wait().map_err(|e| e.to_string())? {
            Some(s) => break Some(s),
            None if started.elapsed() >= limit => break None,
            None => std::thread::sleep(std::time::Duration::from_millis(5)),
        }
    };
    // Whatever the script started in the background goes with it.
    #[cfg(unix)]
    {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", child.id())])
            .stderr(Stdio::null())
            .status();
    }
    let _ = child.kill();
    let _ = child.wait();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    Ok(match status {
        Some(s) => Bounded {
            success: s.success(),
            status: format!("exited with {}", s.code().unwrap_or(-1)),
            stderr,
        },
        None => Bounded {
            success: false,
            status: format!(
                "did not finish within {} s and was stopped",
                limit.as_secs()
            ),
            stderr,
        },
    })
}

/// `quote` is used by tools that print a journal entry as a shell line.
pub fn shell_line(words: &[String]) -> String {
    words
        .iter()
        .map(|w| {
            if w.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./:=+,".contains(c))
                && !w.is_empty()
            {
                w.clone()
            } else {
                quote(w)
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
