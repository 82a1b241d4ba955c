#!/usr/bin/env bash
# Runs the workspace's test binaries under valgrind memcheck: an `unsafe` block whose invariant
# broke (a use after free, a read of uninitialised or freed memory, a double free) fails here
# even where the test's assertions still pass. Not run by CI (it takes long); run it after
# touching unsafe code:
#
#     scripts/valgrind-tests.sh                 # every test binary but the skipped ones
#     scripts/valgrind-tests.sh autograd_core   # only binaries whose name contains a word
#     VALGRIND_BUILD="-p autograd-tests --test engine_races" scripts/valgrind-tests.sh
#                                               # build (and run) only these binaries
#
# Exits non-zero when any binary fails or valgrind reports an error.
set -uo pipefail
cd "$(dirname "$0")/.."

# Binaries too slow under valgrind (the compile-fail UI tests run rustc; the others run example
# programs or train models), by target name.
SKIP=(ui bench_quick command_lines tiny_transformer train_digits)

command -v valgrind >/dev/null || { echo "valgrind not found" >&2; exit 2; }
command -v jq >/dev/null || { echo "jq not found" >&2; exit 2; }

# a proc-macro crate's test binary links the toolchain's libstd dynamically, as cargo test
# arranges; outside cargo it needs the toolchain's target lib directory
export LD_LIBRARY_PATH="$(rustc --print target-libdir)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

echo "building the test binaries..."
mapfile -t BINS < <(cargo test ${VALGRIND_BUILD:---workspace} --no-run --message-format=json 2>/dev/null |
    jq -r 'select(.reason == "compiler-artifact" and .executable != null and .profile.test == true)
           | "\(.target.name)\t\(.executable)"')
[ "${#BINS[@]}" -gt 0 ] || { echo "no test binaries built" >&2; exit 2; }

passed=() failed=() skipped=()
for entry in "${BINS[@]}"; do
    name=${entry%%$'\t'*} exe=${entry#*$'\t'}
    if [ "$#" -gt 0 ] && ! for word in "$@"; do [[ $name == *"$word"* ]] && echo; done | grep -q .; then
        continue
    fi
    if printf '%s\n' "${SKIP[@]}" | grep -qx "$name"; then
        skipped+=("$name")
        continue
    fi
    echo "== $name ($exe)"
    # one test thread: valgrind serialises threads anyway, and reports stay readable
    if valgrind --tool=memcheck --error-exitcode=1 --leak-check=no --quiet \
        "$exe" --test-threads=1 -q; then
        passed+=("$name")
    else
        failed+=("$name")
    fi
done

echo
echo "valgrind memcheck: ${#passed[@]} passed, ${#failed[@]} failed, ${#skipped[@]} skipped"
[ "${#skipped[@]}" -eq 0 ] || echo "skipped: ${skipped[*]}"
[ "${#failed[@]}" -eq 0 ] || { echo "FAILED: ${failed[*]}"; exit 1; }
