//! Checks that every rank is about to do the same thing, before it does it: each rank
//! contributes a fixed-size record to one all-gather (a collective that cannot hang on
//! disagreement, as a message of the wrong size could), and every rank then sees every record
//! and reaches the same verdict. Disagreement is an error on every rank, never a hang.

use autograd_core::{Error, Result};

use super::World;

/// Gathers every rank's `record` (all of length `N`); `Ok` when they are all equal, else
/// `Error::Value` on every rank, saying "{what}" and describing each rank that differs from
/// rank 0 with `describe` beside rank 0's record.
pub(crate) fn agree<const N: usize>(
    world: &World,
    record: &[u64; N],
    what: &str,
    describe: impl Fn(&[u64; N]) -> String,
) -> Result<()> {
    let records = gather(world, record);
    let Some(first) = records.first() else {
        return Ok(());
    };
    let differing: Vec<usize> = (1..records.len())
        .filter(|&r| records[r] != *first)
        .collect();
    if differing.is_empty() {
        return Ok(());
    }
    let others = differing
        .iter()
        .map(|&r| format!("rank {r} has {}", describe(&records[r])))
        .collect::<Vec<_>>()
        .join("; ");
    Err(Error::Value(format!(
        "{what}: ranks {} disagree with rank 0 (rank 0 has {}; {others})",
        listed(&differing),
        describe(first),
    )))
}

/// Every rank's `record`, in rank order.
pub(crate) fn gather<const N: usize>(world: &World, record: &[u64; N]) -> Vec<[u64; N]> {
    let mut all = vec![0u64; N * world.size()];
    world.all_gather_into(&record[..], &mut all[..]);
    all.chunks_exact(N)
        .map(|c| {
            let mut r = [0u64; N];
            r.copy_from_slice(c);
            r
        })
        .collect()
}

/// Makes a local outcome collective: `Ok` on every rank when it is `Ok` on every rank. A rank
/// whose own outcome failed gets its error; the others get `Error::Runtime` naming the ranks
/// where "{what}" failed. Also a synchronisation point: no rank returns before every rank has
/// reported.
pub(crate) fn all_succeeded<T>(world: &World, local: Result<T>, what: &str) -> Result<T> {
    let failed: Vec<usize> = gather(world, &[u64::from(local.is_err())])
        .iter()
        .enumerate()
        .filter(|(_, f)| f[0] != 0)
        .map(|(r, _)| r)
        .collect();
    match local {
        Err(e) => Err(e),
        Ok(_) if !failed.is_empty() => Err(Error::Runtime(format!(
            "{what} failed on rank{} {}",
            if failed.len() == 1 { "" } else { "s" },
            listed(&failed)
        ))),
        ok => ok,
    }
}

/// `1, 2 and 5`, or the first few ranks and how many more.
pub(crate) fn listed(ranks: &[usize]) -> String {
    const SHOWN: usize = 8;
    let shown: Vec<String> = ranks.iter().take(SHOWN).map(ToString::to_string).collect();
    match (ranks.len(), shown.split_last()) {
        (n, _) if n > SHOWN => format!("{} and {} more", shown.join(", "), n - SHOWN),
        (_, Some((last, init))) if !init.is_empty() => format!("{} and {last}", init.join(", ")),
        _ => shown.join(""),
    }
}

/// FNV-1a over bytes: a hash that is the same in every build and on every machine (std's
/// hasher promises neither), for records that ranks compare.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fnv(u64);

impl Fnv {
    /// The empty hash.
    pub(crate) fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    /// Mixes in `bytes`.
    pub(crate) fn bytes(mut self, bytes: &[u8]) -> Fnv {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        self
    }

    /// Mixes in a number.
    pub(crate) fn num(self, n: u64) -> Fnv {
        self.bytes(&n.to_le_bytes())
    }

    /// Mixes in a string and its length (so that `"ab", "c"` and `"a", "bc"` differ).
    pub(crate) fn text(self, s: &str) -> Fnv {
        self.num(s.len() as u64).bytes(s.as_bytes())
    }

    /// The hash.
    pub(crate) fn finish(self) -> u64 {
        self.0
    }
}
