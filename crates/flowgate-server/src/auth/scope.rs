//! What a credential may do: its scopes.

use std::fmt;

/// One scope: a group of routes a credential may call.
///
/// | scope | routes |
/// |---|---|
/// | `admin` | the rules (change, history, rollback), dead letters' requeue and purge, a queue's purge; also every `reader` route |
/// | `worker` | queue submit, lease, ack, nack |
/// | `reporter` | reports of calls' outcomes to the circuit breakers (HTTP and `flowgate.v1.Reports`) |
/// | `reader` | the figures and their stream, `/metrics`, the queues' list, the rules in force, dead letters with their payloads |
/// | `decide` | decisions: check, acquire, release, and Envoy's `ShouldRateLimit` |
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    /// Changing the rules, requeueing and purging.
    Admin,
    /// A queue's producers and consumers.
    Worker,
    /// Reports to the circuit breakers.
    Reporter,
    /// Reading figures, metrics, listings, rules and dead letters.
    Reader,
    /// Decisions.
    Decide,
}

impl Scope {
    /// Every scope, in the order of the documentation.
    pub const ALL: [Scope; 5] = [
        Scope::Admin,
        Scope::Worker,
        Scope::Reporter,
        Scope::Reader,
        Scope::Decide,
    ];

    /// The scope's name in a credentials file and in the API's documents.
    pub fn name(self) -> &'static str {
        match self {
            Scope::Admin => "admin",
            Scope::Worker => "worker",
            Scope::Reporter => "reporter",
            Scope::Reader => "reader",
            Scope::Decide => "decide",
        }
    }

    /// The scope named `name`.
    ///
    /// # Errors
    /// When no scope has that name (the message lists them).
    pub fn parse(name: &str) -> Result<Scope, String> {
        Scope::ALL
            .into_iter()
            .find(|s| s.name() == name)
            .ok_or_else(|| {
                format!("unknown scope `{name}`: use admin, worker, reporter, reader or decide")
            })
    }

    /// What the scope's routes are, for the start-up line that says which are open.
    pub fn routes(self) -> &'static str {
        match self {
            Scope::Admin => "rules changes, requeue and purge",
            Scope::Worker => "queue submit, lease, ack and nack",
            Scope::Reporter => "breaker reports",
            Scope::Reader => {
                "figures, metrics, the queues' list, the rules in force and dead letters' payloads"
            }
            Scope::Decide => {
                "decisions: check, acquire, release, ShouldRateLimit, Decisions/Check and /CheckStream"
            }
        }
    }

    const fn bit(self) -> u8 {
        1 << self as u8
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A set of scopes.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Scopes(u8);

impl Scopes {
    /// No scope.
    pub const NONE: Scopes = Scopes(0);

    /// The set of `scopes`.
    pub fn of(scopes: &[Scope]) -> Scopes {
        Scopes(scopes.iter().fold(0, |bits, s| bits | s.bit()))
    }

    /// Whether `scope` is in the set.
    pub fn contains(self, scope: Scope) -> bool {
        self.0 & scope.bit() != 0
    }

    /// What the set grants: itself, and `reader` with `admin` (whoever may change the rules may
    /// read them and the figures).
    pub fn granted(self) -> Scopes {
        if self.contains(Scope::Admin) {
            Scopes(self.0 | Scope::Reader.bit())
        } else {
            self
        }
    }

    /// The union of two sets.
    pub fn union(self, other: Scopes) -> Scopes {
        Scopes(self.0 | other.0)
    }

    /// The set as bits, one per scope.
    pub(crate) fn bits(self) -> u8 {
        self.0
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The scopes of the set, in [`Scope::ALL`]'s order.
    pub fn iter(self) -> impl Iterator<Item = Scope> {
        Scope::ALL.into_iter().filter(move |s| self.contains(*s))
    }

    /// Parses `admin,reader` (comma-separated names; at least one).
    ///
    /// # Errors
    /// An unknown or missing scope.
    pub fn parse(text: &str) -> Result<Scopes, String> {
        let mut bits = 0;
        for name in text.split(',').map(str::trim) {
            if name.is_empty() {
                return Err(format!(
                    "`{text}`: a credential needs its scopes, e.g. `worker` or `admin,reader`"
                ));
            }
            bits |= Scope::parse(name)?.bit();
        }
        Ok(Scopes(bits))
    }
}

impl From<Scope> for Scopes {
    fn from(s: Scope) -> Self {
        Scopes(s.bit())
    }
}

impl fmt::Display for Scopes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for s in self.iter() {
            if !first {
                f.write_str(",")?;
            }
            f.write_str(s.name())?;
            first = false;
        }
        Ok(())
    }
}

impl fmt::Debug for Scopes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Scopes({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_back() {
        for s in Scope::ALL {
            assert_eq!(Scope::parse(s.name()), Ok(s));
        }
        let set = Scopes::parse("reader, admin").unwrap();
        assert_eq!(set.to_string(), "admin,reader");
        assert!(Scopes::parse("admin,").is_err());
        assert!(
            Scopes::parse("root")
                .unwrap_err()
                .contains("unknown scope `root`")
        );
    }

    #[test]
    fn admin_grants_reader_and_nothing_else() {
        let g = Scopes::from(Scope::Admin).granted();
        assert!(g.contains(Scope::Admin) && g.contains(Scope::Reader));
        assert!(!g.contains(Scope::Worker) && !g.contains(Scope::Decide));
        assert!(!Scopes::from(Scope::Reader).granted().contains(Scope::Admin));
    }
}
