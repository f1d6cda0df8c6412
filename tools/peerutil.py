"""Helpers shared by the Python peers of `xmr bench` (tools.WriteScript
writes this module beside every peer script, which imports it)."""
import resource


def peak_rss_mib():
    """This process's own peak resident set in MiB: VmHWM where /proc has it.
    getrusage's ru_maxrss would report the Go parent's peak when that is
    larger: Linux keeps a forked child's high-water mark across exec."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
