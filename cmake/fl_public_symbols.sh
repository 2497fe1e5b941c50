#!/bin/sh
# fl_public_symbols.sh HEADER... — print, sorted, the fl_ functions the headers declare: a line at
# column 0 that is not a typedef, static, extern or preprocessor line and names an fl_ function
# before its `(` (`int fl_loader_next(fl_loader *L, ...`, the style of every public header).
# Used by cmake/fl_public_api.cmake to write libfastload's version script.
set -e
for h in "$@"; do
    grep -vE '^(typedef|static|#|extern)' "$h" |
        grep -oE '^([A-Za-z_][^;{}()=]*[ *])?fl_[a-z0-9_]+ *\(' |
        grep -oE 'fl_[a-z0-9_]+ *\($' | tr -d ' ('
done | LC_ALL=C sort -u
