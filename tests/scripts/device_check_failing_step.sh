#!/bin/bash
# scripts/device-check fails when a step fails that no check judges: cvest
# wrapped so that `cvest info` exits 3 (nothing else changes); the
# device check must exit 1 and name the step in its JSON.
#   device_check_failing_step.sh PYTHON DEVICE_CHECK CVEST WORK
set -u
python="$1" check="$2" cvest="$3" work="$4"
rm -rf "$work" && mkdir -p "$work"
cat > "$work/cvest" <<W
#!/bin/bash
[ "\$1" = info ] && { echo "cvest: error: injected" >&2; exit 3; }
exec "$cvest" "\$@"
W
chmod +x "$work/cvest"
"$python" "$check" "$work/out" --size smoke --cvest "$work/cvest" --tests "" --python "$python" --work "$work/w" \
  > "$work/log.txt" 2>&1
rc=$?
[ "$rc" -eq 1 ] || { tail -20 "$work/log.txt"; echo "FAIL: device-check exited $rc with a failing info step (expected 1)"; exit 1; }
grep -q '"step info' "$work/out/device-check.json" 2> /dev/null || grep -q 'step info' "$work/log.txt" \
  || { tail -5 "$work/log.txt"; echo "FAIL: the failing step is not named"; exit 1; }
echo "ok: device-check exits 1 and names the failing step: $(grep -o 'FAILED: .*' "$work/log.txt" | head -1)"
