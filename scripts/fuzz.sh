#!/usr/bin/env bash
# scripts/fuzz.sh [SECONDS_EACH] [HARNESS...]: build the libFuzzer harnesses (fuzz/*.c,
# clang -fsanitize=fuzzer,address,undefined over the whole library built the same way in
# $FUZZ_BUILD, default build-fz/), replay fuzz/regress/<harness>/* (every input that ever
# crashed a parser: must pass), then fuzz each harness for SECONDS_EACH seconds (default 60;
# 0 = replay only) starting from fuzz/corpus/<harness>/. New corpus entries go to
# $FUZZ_BUILD/corpus/<harness>/ (the committed seeds stay small); crashes to
# $FUZZ_BUILD/crash/<harness>/, FUZZ_JOBS harnesses at a time (default 2). Exit 1 on any
# crash. Stats: $FUZZ_BUILD/stats.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-60}
shift || true
B=${FUZZ_BUILD:-build-fz}
JOBS=${FUZZ_JOBS:-2}
export FUZZ_TMPDIR=${FUZZ_TMPDIR:-/dev/shm}
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# fuzz/util.c tracks heap blocks of a rejected input (freed after the longjmp).
# libyaml is linked statically when available so that its allocations are tracked too.
WRAP="-Wl,--wrap=malloc -Wl,--wrap=calloc -Wl,--wrap=realloc -Wl,--wrap=free -Wl,--wrap=posix_memalign"
WRAP="$WRAP -Wl,--wrap=fopen -Wl,--wrap=fclose"
YAML=-lyaml
[ -f /usr/lib/x86_64-linux-gnu/libyaml.a ] && YAML=-l:libyaml.a
LDLIBS="-lopenblas -lpcre2-8 -lcjson $YAML -lzstd -lz -lcrypto -lm -lpthread"

mkdir -p "$B"
# The library: every src/ object with sanitizers + fuzzer coverage, no MPI.
CFLAGS="-O1 -g -march=native -fsanitize=fuzzer-no-link $SAN" LDFLAGS="-fsanitize=address,undefined" \
    make -s BUILD="$B" CC=clang MPI=0 -j"$JOBS" "$B/libolmo.a" >"$B/make.log" 2>&1 ||
    { tail -30 "$B/make.log"; echo "FAIL: building the fuzz library (log: $B/make.log)"; exit 1; }

if [ $# -gt 0 ]; then HARNESSES="$*"; else
    HARNESSES=$(for f in fuzz/*.c; do n=$(basename "$f" .c); [ "$n" = util ] || echo "$n"; done)
fi
mkdir -p "$B/fuzz"
for h in $HARNESSES; do
    if [ ! "$B/fuzz/$h" -nt "fuzz/$h.c" ] || [ ! "$B/fuzz/$h" -nt "$B/libolmo.a" ] || [ ! "$B/fuzz/$h" -nt fuzz/util.c ]; then
        clang -O1 -g -march=native -std=c11 -D_GNU_SOURCE -fopenmp -fno-math-errno -Isrc -I/usr/include/cjson \
            -Wno-unused-function -fsanitize=fuzzer $SAN -o "$B/fuzz/$h" "fuzz/$h.c" "$B/libolmo.a" $LDLIBS $WRAP \
            $(sed -n 's|^// FUZZ_LDFLAGS: ||p' "fuzz/$h.c")
    fi
done

# Leaks after a longjmp out of a rejected input are expected (see fuzz/util.c).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
fail=0
: > "$B/stats.txt"
for h in $HARNESSES; do
    if [ -d "fuzz/regress/$h" ] && [ -n "$(ls -A "fuzz/regress/$h")" ]; then
        if ! "$B/fuzz/$h" -runs=0 "fuzz/regress/$h"/* > "$B/fuzz/$h.regress.log" 2>&1; then
            echo "FAIL: $h: a regression input crashes again (see $B/fuzz/$h.regress.log)"
            tail -30 "$B/fuzz/$h.regress.log"
            fail=1
        else
            echo "ok: $h: $(ls "fuzz/regress/$h" | wc -l) regression input(s) replayed"
        fi
    fi
done

# fuzz_one H: fuzz harness H for SECS seconds; its stats line into $B/fuzz/H.stat, and
# exit 1 on a crash. Each libFuzzer process is single-threaded, so JOBS of them run at once:
# every harness still gets SECS seconds of a core, in 1/JOBS of the wall time.
fuzz_one() {
    local h=$1 log="$B/fuzz/$1.log" st
    mkdir -p "$B/corpus/$h" "$B/crash/$h"
    # -close_fd_mask=2: the parsers' own error messages would swamp the log (libFuzzer
    # keeps its own and the sanitizers' reports). -rss_limit/-malloc_limit: an input that
    # makes a parser allocate > 2 GiB is a bug (resource limits on untrusted input).
    if "$B/fuzz/$h" -max_total_time="$SECS" -timeout=20 -rss_limit_mb=2560 -malloc_limit_mb=2048 \
        -max_len=${FUZZ_MAX_LEN:-16384} -close_fd_mask=2 -print_final_stats=1 \
        -artifact_prefix="$B/crash/$h/" "$B/corpus/$h" "fuzz/corpus/$h" > "$log" 2>&1; then
        st=ok
    else
        st=CRASH
    fi
    local execs cov ft corp
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo ?)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo ?)
    ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo ?)
    corp=$(ls "$B/corpus/$h" | wc -l)
    echo "$h: $st ${SECS}s execs=$execs cov=$cov ft=$ft corpus=$corp" > "$B/fuzz/$h.stat"
    [ $st = ok ]
}
if [ "$SECS" -gt 0 ]; then
    pids=()
    for h in $HARNESSES; do
        while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
        fuzz_one "$h" & pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || true; done
    for h in $HARNESSES; do   # in harness order, whatever order they finished in
        line=$(cat "$B/fuzz/$h.stat")
        echo "$line" | tee -a "$B/stats.txt"
        if [[ $line == "$h: CRASH"* ]]; then
            fail=1
            grep -E 'ERROR|runtime error|SUMMARY|Test unit written|^    #[0-9] ' "$B/fuzz/$h.log" | head -30
        fi
    done
fi
exit $fail
