# expect.sh — assertions shared by the shell tests (sourced after the caller defines `fail` and
# the temp dir $T): run a command and check its exit status, then look into what it printed.

# expect_status WANT DESCRIPTION -- command...   (stdout in $T/out, stderr in $T/err)
expect_status() {
    local want=$1 what=$2
    shift 3
    "$@" >"$T/out" 2>"$T/err"
    local got=$?
    if [[ $got -ne $want ]]; then
        fail "$what: exit $got, want $want"
        sed 's/^/    /' "$T/err" | head -5
        return 1
    fi
    return 0
}

# expect_err SUBSTRING DESCRIPTION: the last command's stderr contains SUBSTRING
expect_err() {
    grep -qF -- "$1" "$T/err" && return 0
    fail "$2: stderr lacks '$1'"
    sed 's/^/    /' "$T/err" | head -5
    return 1
}
