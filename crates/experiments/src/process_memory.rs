//! The resident memory of this process, from Linux's `/proc/self/status` (`VmRSS`, and
//! the peak `VmHWM`, which writing `5` to `/proc/self/clear_refs` resets; Linux ≥ 4.0).
//! Elsewhere every reading is `None`, and experiments print "n/a".

/// Bytes resident now.
pub fn resident_bytes() -> Option<u64> {
    field(&std::fs::read_to_string("/proc/self/status").ok()?, "VmRSS:")
}

/// The most bytes resident since the process started or since [`reset_peak`].
pub fn peak_bytes() -> Option<u64> {
    field(&std::fs::read_to_string("/proc/self/status").ok()?, "VmHWM:")
}

/// Starts a new peak at the current resident size. False where the kernel does not allow
/// it (then [`peak_bytes`] keeps the peak since the process started).
pub fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The value of the `name` line of a `/proc/*/status` text, in bytes (the kernel writes
/// kB, meaning KiB). `None` if the line is missing or malformed.
fn field(status: &str, name: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(name))?;
    let mut words = line[name.len()..].split_whitespace();
    let kib: u64 = words.next()?.parse().ok()?;
    (words.next() == Some("kB")).then_some(kib.checked_mul(1024)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_kib_lines_and_refuses_malformed_ones() {
        let status = "Name:\tworldmesh\nVmHWM:\t  204800 kB\nVmRSS:\t   10240 kB\nVmBad:\t12 MB\n";
        assert_eq!(field(status, "VmHWM:"), Some(204_800 * 1024));
        assert_eq!(field(status, "VmRSS:"), Some(10_240 * 1024));
        assert_eq!(field(status, "VmBad:"), None);
        assert_eq!(field(status, "VmSwap:"), None);
        assert_eq!(field("VmRSS:\tlots kB\n", "VmRSS:"), None);
    }

    #[test]
    fn this_process_has_a_resident_size_no_larger_than_its_peak() {
        // Linux only: elsewhere both are None, which the experiment reports as such.
        if let (Some(now), Some(peak)) = (resident_bytes(), peak_bytes()) {
            assert!(now > 0 && now <= peak, "{now} > {peak}");
        }
    }
}
