# Sourced by guest-images/record-*.sh: boots the kernel kpemu boots under QEMU TCG, the reference
# machine, with an initramfs, and keeps the console. Changes nothing outside the given files.
#
# Provides: die; reference_args USAGE "$@" (parses "[--kernel debian[:SUITE]|FILE] [--out FILE] ARCH [NAME]"
#           into $kernel, $kernel_file (a kernel file, e.g. one guest-images/build-kernel.sh built),
#           $out, $arch, $name; sets $qemu through need_qemu); need_qemu ARCH (sets $qemu,
#           installing Debian's QEMU when missing, as root);
#           kernel_print WHAT (kpemu images --print for the chosen kernel); kernel_series;
#           file_release FILE (the "Linux version" release of a kernel file: bzImage, vmlinux, Image);
#           kernel_header (the "# kernel:", "# suite:" and "# qemu:" header lines);
#           boot_probe_args DEFS (a probe script as kprobe_event=/trace_event= values: $kp, $te, $events);
#           qemu_boot INITRAMFS APPEND LOG [MARKER] (the kernel's console= and the timing options
#           below are added; RAM: $qemu_mem MiB, default 512; arm64 CPU: $qemu_cpu, default cortex-a57;
#           CPUs: $qemu_cpus (-smp N, single-threaded TCG: the vCPUs in turn, as kpemu runs them;
#           unset: QEMU's one CPU, the command line unchanged);
#           time limit: $qemu_limit host seconds, default 600;
#           MARKER: the console line a finished boot prints: a boot that misses it for a known reason
#           of the host's speed is run once more).
#
# A slow or busy host. QEMU TCG keeps the guest's clocks (PIT, HPET, TSC, the arm64 generic timer)
# on the host's time, so a host that runs QEMU slowly, or stops it for a while, shows Linux a
# machine whose timers race ahead of its CPU. Linux's boot checks of its timers then fail: on
# x86-64, check_timer() waits a TSC-timed busy loop for the PIT's interrupts through the I/O APIC
# and panics with "IO-APIC + timer doesn't work!" when too few arrived (seen in CI on the
# source-built 6.12 kernel while other work ran). Every reference boot therefore gets what
# reference_timing_append prints: the options of Linux's kernel-parameters.txt that turn those checks
# off for emulated machines (no_timer_check: "Disables the code which tests for broken timer IRQ
# sources"). What else a slow host changes is only timestamps and which clocksource Linux keeps
# (TSC calibration against the PIT, the clocksource watchdog), which no recording keeps.
# KPEMU_QEMU_SLOW_HOST=1 makes such a host on purpose (run_qemu): without no_timer_check the
# source-built 6.12 kernel panics there as it did in CI; SourceKernelTest records through it.

die() { echo "${prog:-record}: $*" >&2; exit 1; }

# kpemu's command line: the launcher, or $KPEMU_CLI when set (a command, e.g. "java -cp ...
# dev.kpemu.cli.Main": tests that run these scripts use their own classes, so the launcher never
# rebuilds the tree a test run is using).
kpemu_cli() {
  if [ -n "${KPEMU_CLI:-}" ]; then local cli; read -r -a cli <<<"$KPEMU_CLI"; "${cli[@]}" "$@"
  else "$root/kpemu" "$@"; fi
}

reference_args() {
  local usage=$1; shift
  kernel=debian; kernel_file=""; out=""; arch=""; name=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --kernel) [ $# -ge 2 ] || { echo "$prog: usage: $usage" >&2; exit 2; }; kernel=$2; shift 2 ;;
      --kernel=*) kernel=${1#--kernel=}; shift ;;
      --out) [ $# -ge 2 ] || { echo "$prog: usage: $usage" >&2; exit 2; }; out=$2; shift 2 ;;
      --out=*) out=${1#--out=}; shift ;;
      -h|--help) sed -n '2,/^set -/p' "$0" | sed '$d'; exit 0 ;;
      -*) echo "$prog: usage: $usage" >&2; exit 2 ;;
      *) if [ -z "$arch" ]; then arch=$1; elif [ -z "$name" ]; then name=$1; else echo "$prog: usage: $usage" >&2; exit 2; fi; shift ;;
    esac
  done
  [ -n "$arch" ] || { echo "$prog: usage: $usage" >&2; exit 2; }
  case "$kernel" in
    debian|debian:*|debian@*) ;;
    *) [ -f "$kernel" ] || { echo "$prog: --kernel takes debian, debian:SUITE[@RELEASE] or a kernel file; no file '$kernel'" >&2; exit 2; }
       kernel_file=$(readlink -f "$kernel") ;;
  esac
  need_qemu "$arch"
}

# need_qemu ARCH: sets $qemu, installing Debian's QEMU when missing (as root).
need_qemu() {
  local pkg
  case "$1" in
    x86_64) qemu=qemu-system-x86_64; pkg=qemu-system-x86 ;;
    arm64)  qemu=qemu-system-aarch64; pkg=qemu-system-arm ;;
    *) die "unknown architecture '$1' (x86_64 or arm64)" ;;
  esac
  if ! command -v "$qemu" >/dev/null; then
    [ "$(id -u)" = 0 ] || die "$qemu is missing; install Debian's $pkg"
    apt-get install -y "$pkg" >/dev/null 2>&1 || die "apt-get install $pkg failed"
  fi
}

# A kernel file is its own kernel (x86_64: QEMU boots a bzImage through its firmware, or an ELF
# vmlinux through PVH); its guest is the default initramfs; release from its banner.
kernel_print() {
  if [ -z "$kernel_file" ]; then kpemu_cli images --kernel "$kernel" --arch "$arch" --print "$1"; return; fi
  case "$1" in
    kernel|vmlinux) echo "$kernel_file" ;;
    initramfs) kpemu_cli images --arch "$arch" --print initramfs ;;
    release) file_release "$kernel_file" ;;
    package) echo "file:$(basename "$kernel_file")" ;;
    version) sha256sum < "$kernel_file" | cut -c1-16 ;;
    suite) echo none ;;
    *) die "kernel_print: unknown value '$1'" ;;
  esac
}

# file_release FILE: the kernel release its "Linux version RELEASE ..." banner names.
file_release() {
  local f=$1 rel kv
  rel=$(strings -n 20 "$f" | sed -nE 's/^Linux version ([^ ]+) .*/\1/p' | head -n1)
  if [ -z "$rel" ] && [ "$(od -An -c -j 514 -N 4 "$f" | tr -d ' ')" = HdrS ]; then
    # bzImage: the setup header's kernel_version (offset 0x20e) points at "RELEASE (builder) #..."
    kv=$(( $(od -An -tu2 -j 526 -N 2 "$f") + 0x200 ))
    rel=$(dd if="$f" bs=1 skip="$kv" count=200 2>/dev/null | tr '\0' '\n' | head -n1 | cut -d' ' -f1)
  fi
  [ -n "$rel" ] || die "$f: no 'Linux version' string (a compressed image? pass the vmlinux or Image)"
  echo "$rel"
}

# The kernel's series (major.minor of its release): references are kept per series.
kernel_series() {
  kernel_print release | grep -oE '^[0-9]+\.[0-9]+' || die "cannot tell the kernel series of release '$(kernel_print release)'"
}

kernel_header() {
  echo "# kernel: $(kernel_print release) (package=$(kernel_print package) version=$(kernel_print version) )"
  echo "# suite: $(kernel_print suite)"
  echo "# qemu: $("$qemu" --version | head -n1)"
}

# boot_probe_args DEFS: the kprobe_events definitions of DEFS (one per line, '#' comments) as
# Linux's boot parameters take them: $kp, kprobe_event='s value (',' for the spaces inside a
# definition, ';' between definitions); $events, each GROUP:EVENT; $te, trace_event='s value (the
# events enabled at boot). Dies when DEFS has none.
boot_probe_args() {
  local defs=$1 line head ev
  events=()
  kp=""
  while IFS= read -r line || [ -n "$line" ]; do
    line=${line%%#*}; line=$(echo "$line" | sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//')
    [ -n "$line" ] || continue
    head=${line%% *}
    ev=${head#*:}; case "$ev" in */*) ;; *) ev="kprobes/$ev" ;; esac
    events+=("${ev/\//:}")
    kp+="${kp:+;}$(echo "$line" | tr -s ' ' ',')"
  done < "$defs"
  [ ${#events[@]} -gt 0 ] || die "$defs has no definitions"
  te=$(IFS=,; echo "${events[*]}")
}

# The options every reference boot adds for a slow host (above).
reference_timing_append() {
  case "$arch" in
    x86_64) echo "no_timer_check" ;;
    *) echo "" ;;
  esac
}

# Console lines by which a boot that did not finish shows it failed for the host's speed, each with
# the reason logged when the boot is run again.
timing_failure() {   # LOG: prints the reason, or nothing
  local log=$1
  if grep -aq "IO-APIC + timer doesn't work" "$log"; then
    echo "Linux's check_timer() saw too few timer interrupts (the host ran QEMU slowly)"
  elif grep -aqE "rcu: INFO: rcu_(sched|preempt) (self-)?detected stall" "$log"; then
    echo "an RCU stall (QEMU was not scheduled for seconds of the guest's time)"
  elif grep -aq "watchdog: BUG: soft lockup" "$log"; then
    echo "a soft lockup report (QEMU was not scheduled for seconds of the guest's time)"
  fi
  return 0
}

# corpus_machine: the corpus guest's machine (record-corpus.sh, fuzz-reference.sh): QEMU gets kpemu's
# RAM (254 MiB left to the guest) and kpemu's kernel command line, so /proc/cmdline reads the same.
corpus_machine() {
  qemu_mem=254
  if [ "$arch" = x86_64 ]; then append="nokaslr"; else append="earlycon=pl011,0x9000000 nokaslr"; fi
}

# qemu_command INITRAMFS APPEND: sets $cmd to the reference machine's command line.
qemu_command() {
  # no trailing blank: Linux keeps it in /proc/cmdline (a task reading it counts one byte more)
  local initramfs=$1 timing append
  timing=$(reference_timing_append)
  append="$2${timing:+ $timing}"
  if [ "$arch" = x86_64 ]; then
    cmd=("$qemu" -M pc -m "${qemu_mem:-512}" -nographic -no-reboot -kernel "$(kernel_print vmlinux)" -initrd "$initramfs" -append "console=ttyS0 $append")
  else
    cmd=("$qemu" -M virt -cpu "${qemu_cpu:-cortex-a57}" -m "${qemu_mem:-512}" -nographic -no-reboot -kernel "$(kernel_print kernel)" -initrd "$initramfs" -append "console=ttyAMA0 $append")
  fi
  if [ -n "${qemu_cpus:-}" ]; then cmd+=(-smp "$qemu_cpus" -accel tcg,thread=single); fi
}

# run_qemu LOG LIMIT: runs $cmd for at most LIMIT host seconds.
run_qemu() {
  local log=$1 limit=$2
  if [ -z "${KPEMU_QEMU_SLOW_HOST:-}" ]; then timeout "$limit" "${cmd[@]}" >"$log" 2>&1 || true; return 0; fi
  # The busy host made on purpose: QEMU is stopped (SIGSTOP) for 95 ms of every 100 ms, as a host
  # that runs other work deschedules it, while the guest's clocks go on with the host's. The
  # slowdown is bounded (about 20x) whatever else the host runs; a busy loop on QEMU's core with
  # QEMU's main loop at nice 19 (the first version) starved it without bound on a host that was
  # itself busy, so the boot missed the time limit.
  local q end
  "${cmd[@]}" >"$log" 2>&1 </dev/null & q=$!
  echo "${prog:-record}: a busy host: QEMU stopped for 95 ms of every 100 ms" >&2
  end=$(( SECONDS + limit ))
  while kill -0 "$q" 2>/dev/null && [ "$SECONDS" -lt "$end" ]; do
    sleep 0.005
    kill -STOP "$q" 2>/dev/null || break
    sleep 0.095
    kill -CONT "$q" 2>/dev/null || break
  done
  kill -CONT "$q" 2>/dev/null || true
  kill "$q" 2>/dev/null || true; wait "$q" 2>/dev/null || true
  return 0
}

qemu_boot() {
  local initramfs=$1 append=$2 log=$3 marker=${4:-} cmd reason
  qemu_command "$initramfs" "$append"
  run_qemu "$log" "${qemu_limit:-600}"
  [ -n "$marker" ] || return 0
  grep -aq -- "$marker" "$log" && return 0
  reason=$(timing_failure "$log")
  [ -n "$reason" ] || return 0     # the caller reports the failure with the console's tail
  echo "${prog:-record}: the reference boot did not reach $marker: $reason; booting it once more" >&2
  run_qemu "$log" "${qemu_limit:-600}"
}

# btf_offset STRUCT MEMBER: the member's byte offset in the chosen kernel's own BTF (pahole prints
# "/* OFFSET SIZE */" after each member; Debian's pahole is installed with apt-get, as root, when missing).
btf_offset() {
  if ! command -v pahole >/dev/null; then
    [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null || die "pahole is missing; install Debian's pahole"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends pahole >/dev/null 2>&1 || die "apt-get install pahole failed"
  fi
  pahole -C "$1" "$(kernel_print vmlinux)" 2>/dev/null \
    | awk -v m="$2" '!done { for (i = 1; i <= NF && !done; i++) if ($i == m ";" || index($i, m "[") == 1) { for (j = i; j <= NF; j++) if ($j == "/*") { print $(j + 1); done = 1; break } } }'
}
