"""Raw GPU-health readings of one GPU machine, for the gate's GPU-health stage: nvidia-smi's full and sectioned
`-q`, the health fields of `--query-gpu` (each refused field tried under its other names, with the list of valid
fields), the kernel log's Xid/NVRM lines, the same facts through NVML (nvidia-ml-py), and what one such read
costs (20 reads each, median and max in ms). Run by realgpu/real_sglang_h200.sh; stdlib + pynvml only.

  python3 realgpu/gpu_health_capture.py DIR

Each command NAME leaves DIR/NAME.out, NAME.err and NAME.rc (the layout of tests/fixtures/nvidia-smi-h200);
DIR/nvml.json holds the NVML readings (a call that raises is recorded with its error), DIR/timing.json the costs.
"""
import json
import os
import statistics
import subprocess
import sys
import time

HEALTH_FIELDS = ["index", "pci.bus_id", "uuid", "pcie.link.gen.current", "pcie.link.gen.max",
                 "pcie.link.width.current", "pcie.link.width.max", "ecc.errors.uncorrected.volatile.total",
                 "retired_pages.pending", "remapped_rows.pending", "remapped_rows.failure",
                 "clocks_event_reasons.active", "persistence_mode"]
# Other spellings nvidia-smi has used or documents for the same facts (tried one by one when a field is refused).
ALIASES = {
    "pcie.link.gen.current": ["pcie.link.gen.gpucurrent"],
    "pcie.link.gen.max": ["pcie.link.gen.gpumax", "pcie.link.gen.hostmax"],
    "ecc.errors.uncorrected.volatile.total": ["ecc.errors.uncorrected.volatile.device_memory"],
    "retired_pages.pending": ["retired_pages.pending_retirement"],
    "remapped_rows.pending": ["remapped_rows.pending_remapping"],
    "remapped_rows.failure": ["remapped_rows.remapping_failure_occurred"],
    "clocks_event_reasons.active": ["clocks_throttle_reasons.active"],
    "persistence_mode": ["persistence-mode"],
}


def run(out, name, argv, shell=False):
    t0 = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True, shell=shell, timeout=120,
                       executable="/bin/bash" if shell else None)
    took = time.perf_counter() - t0
    for ext, data in (("out", p.stdout), ("err", p.stderr), ("rc", "%d\n" % p.returncode)):
        with open(os.path.join(out, "%s.%s" % (name, ext)), "w") as f:
            f.write(data)
    return p, took


def nvml_read(nvml, h):
    """The health facts through NVML; each call's error kept as text."""
    res = {}

    def call(key, fn, *a):
        try:
            v = fn(h, *a) if h is not None else fn(*a)
            if isinstance(v, bytes):
                v = v.decode()
            if hasattr(v, "_fields_"):
                v = {f[0]: getattr(v, f[0]) for f in v._fields_}
            res[key] = v
        except Exception as exc:  # NVMLError_NotSupported etc.: recorded, not fatal
            res[key] = {"error": "%s: %s" % (type(exc).__name__, exc)}

    call("pci_bus_id", lambda hh: nvml.nvmlDeviceGetPciInfo(hh).busId)
    call("uuid", nvml.nvmlDeviceGetUUID)
    call("pcie_link_gen_current", nvml.nvmlDeviceGetCurrPcieLinkGeneration)
    call("pcie_link_gen_max", nvml.nvmlDeviceGetMaxPcieLinkGeneration)
    call("pcie_link_gen_gpu_max", nvml.nvmlDeviceGetGpuMaxPcieLinkGeneration)
    call("pcie_link_width_current", nvml.nvmlDeviceGetCurrPcieLinkWidth)
    call("pcie_link_width_max", nvml.nvmlDeviceGetMaxPcieLinkWidth)
    call("ecc_mode", nvml.nvmlDeviceGetEccMode)
    call("ecc_uncorrected_volatile_total", nvml.nvmlDeviceGetTotalEccErrors, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
         nvml.NVML_VOLATILE_ECC)
    call("ecc_uncorrected_aggregate_total", nvml.nvmlDeviceGetTotalEccErrors,
         nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_AGGREGATE_ECC)
    call("ecc_corrected_volatile_total", nvml.nvmlDeviceGetTotalEccErrors, nvml.NVML_MEMORY_ERROR_TYPE_CORRECTED,
         nvml.NVML_VOLATILE_ECC)
    call("remapped_rows", nvml.nvmlDeviceGetRemappedRows)  # (corrected rows, uncorrected rows, pending, failure)
    call("retired_pages_pending", nvml.nvmlDeviceGetRetiredPagesPendingStatus)
    call("retired_pages_dbe", nvml.nvmlDeviceGetRetiredPages, nvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
    call("clocks_event_reasons", getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons",
                                         getattr(nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None)))
    call("persistence_mode", nvml.nvmlDeviceGetPersistenceMode)
    call("xid_errors_field", lambda hh: [(v.fieldId, v.nvmlReturn, v.value.ullVal)
                                         for v in nvml.nvmlDeviceGetFieldValues(hh, [getattr(nvml, "NVML_FI_DEV_XID_ERRORS", 0)])])
    return res


def timed(fn, n=20):
    ms = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ms.append((time.perf_counter() - t0) * 1000)
    return {"n": n, "median_ms": round(statistics.median(ms), 3), "max_ms": round(max(ms), 3),
            "min_ms": round(min(ms), 3)}


def main(out):
    os.makedirs(out, exist_ok=True)
    timing = {}
    run(out, "q", ["nvidia-smi", "-q"])
    run(out, "q_sections", ["nvidia-smi", "-q", "-d", "PCIE,ECC,ROW_REMAPPER,PAGE_RETIREMENT,PERFORMANCE,CLOCK"])
    run(out, "help_query_gpu", ["nvidia-smi", "--help-query-gpu"])
    fields = list(HEALTH_FIELDS)
    p, _ = run(out, "health_csv", ["nvidia-smi", "--query-gpu=" + ",".join(fields), "--format=csv"])
    tried = {}
    if p.returncode != 0:
        # find the refused ones, one field at a time, and try their other names
        for i, fld in enumerate(fields):
            q, _ = run(out, "field_%02d_%s" % (i, fld.replace(".", "_")),
                       ["nvidia-smi", "--query-gpu=" + fld, "--format=csv,noheader"])
            if q.returncode != 0:
                tried[fld] = {"rc": q.returncode, "said": q.stdout.strip() or q.stderr.strip()}
                for alt in ALIASES.get(fld, []):
                    a, _ = run(out, "field_%02d_alt_%s" % (i, alt.replace(".", "_")),
                               ["nvidia-smi", "--query-gpu=" + alt, "--format=csv,noheader"])
                    tried[fld][alt] = {"rc": a.returncode, "said": (a.stdout or a.stderr).strip()}
                    if a.returncode == 0:
                        fields[i] = alt
                        break
        run(out, "health_csv_resolved", ["nvidia-smi", "--query-gpu=" + ",".join(fields), "--format=csv"])
    run(out, "health_csv_noheader", ["nvidia-smi", "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"])
    run(out, "dmesg_xid", "dmesg 2>&1 | grep -i -E 'xid|NVRM'; echo \"pipe: ${PIPESTATUS[*]}\"", shell=True)
    run(out, "journalctl_nvrm", "journalctl -k --no-pager 2>&1 | grep -i NVRM; echo \"pipe: ${PIPESTATUS[*]}\"",
        shell=True)
    run(out, "kmsg_probe", "head -c 0 /dev/kmsg && echo readable; ls -l /dev/kmsg; cat /proc/sys/kernel/dmesg_restrict",
        shell=True)
    argv = ["nvidia-smi", "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"]
    timing["nvidia_smi_health_query"] = timed(lambda: subprocess.run(argv, capture_output=True))
    timing["nvidia_smi_q_sections"] = timed(lambda: subprocess.run(
        ["nvidia-smi", "-q", "-d", "PCIE,ECC,ROW_REMAPPER,PAGE_RETIREMENT,PERFORMANCE,CLOCK"], capture_output=True), 5)
    res = {"query_fields_used": fields, "refused_fields": tried}
    try:
        import pynvml as nvml
        t0 = time.perf_counter()
        nvml.nvmlInit()
        timing["nvml_init_ms"] = round((time.perf_counter() - t0) * 1000, 3)
        res["nvml_driver_version"] = nvml.nvmlSystemGetDriverVersion()
        res["nvml_version"] = nvml.nvmlSystemGetNVMLVersion()
        res["pynvml_module"] = getattr(nvml, "__file__", None)
        n = nvml.nvmlDeviceGetCount()
        res["devices"] = [nvml_read(nvml, nvml.nvmlDeviceGetHandleByIndex(i)) for i in range(n)]
        h0 = nvml.nvmlDeviceGetHandleByIndex(0)
        timing["nvml_health_read"] = timed(lambda: nvml_read(nvml, h0))
        timing["nvml_health_read_with_handle_lookup"] = timed(lambda: nvml_read(nvml, nvml.nvmlDeviceGetHandleByIndex(0)))
    except Exception as exc:
        res["nvml_error"] = "%s: %s" % (type(exc).__name__, exc)
    with open(os.path.join(out, "nvml.json"), "w") as f:
        json.dump(res, f, indent=1, default=str)
    with open(os.path.join(out, "timing.json"), "w") as f:
        json.dump(timing, f, indent=1)
    print(json.dumps(timing))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
