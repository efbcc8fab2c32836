# Sourced by the benchmarks: whether the machine stayed quiet while they ran, from the
# CPU time other processes (and the hypervisor's steal) took, measured over the run
# rather than guessed from the load average. A comparison against a peer taken while
# something else ran is not quoted (docs/benchmarks.md).
#   source bench/quiet.sh; quiet_start; ...the timed commands, in the foreground...; quiet_end
# quiet_end prints one line and, when others took more than QUIET_MAX percent of the
# cores (default 5), a NOT QUIET line, and returns 3.

# All cores' busy clock ticks: user nice system irq softirq steal (guest is in user).
_quiet_busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
# This shell's finished children's CPU ticks (cutime + cstime; the name may hold spaces).
_quiet_children() { sed 's/.*) //' /proc/$$/stat | awk '{ print $14 + $15 }'; }

quiet_start() {
  _quiet_load=$(cut -d' ' -f1-3 /proc/loadavg)
  _quiet_busy0=$(_quiet_busy)
  _quiet_children0=$(_quiet_children)
  _quiet_start=$EPOCHREALTIME
}

quiet_end() {
  local busy children wall  # awk, not bc: bc is not on every machine (a GPU machine's image lacks it)
  busy=$(_quiet_busy) children=$(_quiet_children) wall=$(awk -v a="$_quiet_start" -v b="$EPOCHREALTIME" 'BEGIN { print b - a }')
  awk -v busy=$((busy - _quiet_busy0)) -v ours=$((children - _quiet_children0)) -v wall="$wall" \
      -v cores="$(getconf _NPROCESSORS_ONLN)" -v hz="$(getconf CLK_TCK)" -v max="${QUIET_MAX:-5}" \
      -v load="$_quiet_load" 'BEGIN {
    others = 100 * (busy - ours) / (wall * cores * hz)
    if (others < 0) others = 0
    printf "quiet check: other processes took %.1f%% of the %d cores over these %.0f s (load average before: %s)\n",
           others, cores, wall, load
    if (others > max) {
      printf "NOT QUIET: above QUIET_MAX=%s%%: the figures above are not to be quoted\n", max
      exit 3
    }
  }'
}
