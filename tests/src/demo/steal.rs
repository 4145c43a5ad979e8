//! How much of the machine's CPU the hypervisor took during a run ("steal" time in
//! `/proc/stat`): on a shared virtual machine, other guests can take a third of the cores
//! for seconds at a time (measured here: 27% to 41% in one second), which lowers a
//! saturating run's throughput and lengthens its tail whatever the client does. A row that
//! says how much was stolen can be compared with one that does not; `None` where the
//! kernel does not report it.

/// The machine's CPU time so far, in clock ticks, all cores together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuTimes {
    /// Ticks a virtual CPU was ready to run and the hypervisor ran someone else.
    pub stolen: u64,
    /// Every tick: user, nice, system, idle, iowait, irq, softirq and steal.
    pub total: u64,
}

impl CpuTimes {
    /// The times now, from `/proc/stat` (`None` off Linux or when unreadable).
    pub fn now() -> Option<Self> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        Self::parse(&stat)
    }

    /// Reads the first (`cpu`, all cores) line of a `/proc/stat` text.
    pub fn parse(stat: &str) -> Option<Self> {
        let line = stat.lines().find(|line| line.starts_with("cpu "))?;
        let fields: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .take(8)
            .map(str::parse)
            .collect::<Result<_, _>>()
            .ok()?;
        let stolen = *fields.get(7)?;
        Some(Self {
            stolen,
            total: fields.iter().sum(),
        })
    }

    /// The share of the CPU time from `self` to `later` that was stolen.
    pub fn stolen_since(self, later: Self) -> Option<f64> {
        let total = later.total.checked_sub(self.total)?;
        let stolen = later.stolen.checked_sub(self.stolen)?;
        (total > 0).then(|| stolen as f64 / total as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_all_cores_line_and_the_share_stolen() {
        let before = "cpu  100 0 50 800 0 0 0 50 0 0\ncpu0 50 0 25 400 0 0 0 25 0 0\n";
        let after = "cpu  200 0 100 1100 0 0 0 200 0 0\ncpu0 1 1 1 1 1 1 1 1 0 0\n";
        let before = CpuTimes::parse(before).expect("before");
        let after = CpuTimes::parse(after).expect("after");
        assert_eq!(
            before,
            CpuTimes {
                stolen: 50,
                total: 1_000
            }
        );
        // 600 ticks passed, 150 of them stolen.
        assert_eq!(before.stolen_since(after), Some(0.25));
        assert_eq!(after.stolen_since(before), None, "time does not run back");
    }

    #[test]
    fn a_kernel_without_steal_time_reads_as_unknown() {
        assert_eq!(CpuTimes::parse("cpu  1 2 3 4\n"), None);
        assert_eq!(CpuTimes::parse("intr 5\n"), None);
    }
}
