# lib_bench.sh — what the benchmark scripts share: option parsing with --help printed from the
# script's header comment, the check that the tools they run are built, and the median of a
# column of numbers. Source it after setting `me` (the script's name, for messages) and the
# options' default values.

# bench_options "OPT[=VAR] ..." "$@": each --OPT VALUE sets VAR (default: OPT itself); -h/--help
# prints the script's header comment (lines 2 up to `set ...`) and exits 0; anything else is a
# usage error (exit 2).
bench_options() {
    local _bo_spec=$1 _bo_o _bo_v
    shift
    while (($#)); do
        case "$1" in
            -h | --help)
                sed -n '2,/^set /{/^#/p}' "$0" | sed 's/^# \{0,1\}//'
                exit 0
                ;;
        esac
        _bo_v=""
        for _bo_o in $_bo_spec; do
            if [[ "$1" == "--${_bo_o%%=*}" ]]; then
                _bo_v=${_bo_o#*=}
                break
            fi
        done
        [[ -n $_bo_v ]] || { echo "$me: unknown option '$1' (try --help)" >&2; exit 2; }
        printf -v "$_bo_v" '%s' "$2"
        shift 2
    done
}

# bench_need_built PROGRAM...: exits 1 naming the first one that is not an executable.
bench_need_built() {
    local t
    for t; do [[ -x "$t" ]] || { echo "$me: $t not built" >&2; exit 1; }; done
}

# median: the median of the numbers on stdin, one a line.
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
