# lib_bench.sh — what the benchmark scripts share: option parsing with --help printed from the
# script's header comment, the check that the tools they run are built, the packed Fashion-MNIST
# splits, and the median of a column of numbers. Source it after setting `me` (the script's name,
# for messages), `root` (the repository) and the options' default values.

# bench_options "OPT[=VAR] OPT[=VAR]:VALUE ..." "$@": each --OPT VALUE sets VAR (default: OPT
# itself); a flag, written OPT[=VAR]:VALUE, takes no argument and sets VAR to VALUE (e.g.
# "keep:1 no-setup=setup:0"); -h/--help prints the script's header comment (lines 2 up to
# `set ...`) and exits 0; anything else is a usage error (exit 2).
bench_options() {
    local _bo_spec=$1 _bo_o _bo_v _bo_flag
    shift
    while (($#)); do
        case "$1" in
            -h | --help)
                sed -n '2,/^set /{/^#/p}' "$0" | sed 's/^# \{0,1\}//'
                exit 0
                ;;
        esac
        _bo_v="" _bo_flag=0
        for _bo_o in $_bo_spec; do
            if [[ "$1" == "--${_bo_o%%[=:]*}" ]]; then
                if [[ $_bo_o == *:* ]]; then # a flag: VAR (or OPT) and the VALUE after ':'
                    _bo_flag=1
                    _bo_v=${_bo_o%%:*}
                    printf -v "${_bo_v#*=}" '%s' "${_bo_o#*:}"
                else
                    _bo_v=${_bo_o#*=}
                fi
                break
            fi
        done
        [[ -n $_bo_v ]] || { echo "$me: unknown option '$1' (try --help)" >&2; exit 2; }
        if ((_bo_flag)); then
            shift
        else
            printf -v "$_bo_v" '%s' "$2"
            shift 2
        fi
    done
}

# bench_positive VAR[:real]...: exits 2 (a usage error naming the options --VAR) unless each VAR
# holds a whole number >= 1, or with :real digits and dots (e.g. a size in GiB).
bench_positive() {
    local v re bad=0 list=""
    for v; do
        re='^[1-9][0-9]*$'
        [[ $v == *:real ]] && re='^[0-9.]+$'
        v=${v%:real}
        list+="--${v//_/-}, "
        [[ ${!v} =~ $re ]] || bad=1
    done
    ((bad == 0)) || { echo "$me: ${list%, } must be positive numbers" >&2; exit 2; }
}

# bench_need_built PROGRAM...: exits 1 naming the first one that is not an executable.
bench_need_built() {
    local t
    for t; do [[ -x "$t" ]] || { echo "$me: $t not built (--build DIR)" >&2; exit 1; }; done
}

# bench_fashion_mnist PACKDATA: samples/fashion-mnist fetched (its fetch.sh) and its train and test
# splits packed by PACKDATA (raw, zstd:19, with the class names) into
# samples/fashion-mnist/packed/train and .../test, each only when not there yet.
bench_fashion_mnist() {
    local fm="$root/samples/fashion-mnist" split name prefix
    mkdir -p "$fm/packed"
    "$fm/fetch.sh" >/dev/null
    for split in train:train test:t10k; do
        name=${split%%:*} prefix=${split##*:}
        [[ -f "$fm/packed/$name/manifest.json" ]] ||
            "$1" pack --idx "$fm/data/$prefix-images-idx3-ubyte.gz" "$fm/data/$prefix-labels-idx1-ubyte.gz" \
                "$fm/packed/$name" --class-names "$fm/data/classes.txt" --compress zstd:19 --resume --quiet
    done
}

# median: the median of the numbers on stdin, one a line.
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
