//! A circuit breaker: [`BreakerDoc`] to the library's [`BreakerDef`] and back.

use flowgate::breakers::{BreakerDef, BreakerError, BreakerSpec, Strategy};
use flowgate_core::clock::micros;
use flowgate_core::quota::format_micros;

use super::{SchemaError, domain_of, duration_of, err, err_at, name_of, pattern_doc, pattern_of};
use crate::schema::{BreakerDoc, StrategyDoc};

impl BreakerDoc {
    /// The breaker, its domain the file's (`file_domain`) unless it names its own.
    ///
    /// # Errors
    /// [`SchemaError`] naming the field at fault.
    pub(crate) fn to_def(&self, file_domain: Option<&str>) -> Result<BreakerDef, SchemaError> {
        name_of("breaker", "name", &self.name)?;
        let domain = domain_of(self.domain.as_deref(), file_domain, "breaker")?;
        let pattern = pattern_of(&self.pattern, false, false)?;
        let slow_call = self
            .slow_call
            .as_deref()
            .map(|t| duration_of("slow_call", t))
            .transpose()?;
        let strategy = match (self.strategy, slow_call) {
            (StrategyDoc::ErrorRatio | StrategyDoc::ErrorCount, Some(_)) => {
                return Err(err(
                    "slow_call",
                    format!(
                        "`slow_call` is for the slow_call_ratio strategy, and this breaker's is {}",
                        strategy_name(self.strategy)
                    ),
                ));
            }
            (StrategyDoc::ErrorRatio, None) => Strategy::ErrorRatio,
            (StrategyDoc::ErrorCount, None) => Strategy::ErrorCount,
            (StrategyDoc::SlowCallRatio, Some(s)) => Strategy::SlowCallRatio {
                slow_call: micros(s),
            },
            (StrategyDoc::SlowCallRatio, None) => {
                return Err(err_at(
                    "slow_call",
                    "strategy",
                    "the slow_call_ratio strategy needs `slow_call`, the latency over which a call is slow (e.g. \"800ms\")",
                ));
            }
        };
        let window = duration_of("window", &self.window)?;
        let open_for = duration_of("open_for", &self.open_for)?;
        let probe_timeout = match &self.probe_timeout {
            Some(t) => duration_of("probe_timeout", t)?,
            None => open_for,
        };
        if self.min_nodes == Some(0) {
            return Err(err("min_nodes", "must be at least 1 (or left out)"));
        }
        let spec = BreakerSpec::new(
            strategy,
            self.threshold,
            micros(window),
            self.min_calls,
            micros(open_for),
            self.probes.unwrap_or(1),
            micros(probe_timeout),
        )
        .map_err(|e| match e {
            BreakerError::Invalid { field, message } => {
                // A probe timeout left out is open_for's.
                let field = if field == "probe_timeout" && self.probe_timeout.is_none() {
                    "open_for"
                } else {
                    field
                };
                err(field, message)
            }
            other => err("", other.to_string()),
        })?;
        let mut def = BreakerDef::new(domain, self.name.clone(), pattern, spec);
        def.min_nodes = self.min_nodes;
        Ok(def)
    }

    /// The document of a breaker: converting it back gives the same breaker.
    ///
    /// # Errors
    /// [`UnnamedStrategy`] for a strategy the schema has no name for (one added to the library
    /// and not here).
    pub fn of(d: &BreakerDef) -> Result<Self, UnnamedStrategy> {
        let spec = &d.spec;
        let (strategy, slow_call) = match spec.strategy() {
            Strategy::ErrorRatio => (StrategyDoc::ErrorRatio, None),
            Strategy::SlowCallRatio { slow_call } => {
                (StrategyDoc::SlowCallRatio, Some(format_micros(slow_call)))
            }
            Strategy::ErrorCount => (StrategyDoc::ErrorCount, None),
            other => return Err(UnnamedStrategy(format!("{other:?}"))),
        };
        Ok(BreakerDoc {
            domain: Some(d.domain.clone()),
            name: d.name.clone(),
            pattern: pattern_doc(&d.pattern),
            strategy,
            slow_call,
            threshold: spec.threshold(),
            window: format_micros(spec.window()),
            min_calls: spec.min_calls(),
            open_for: format_micros(spec.open_for()),
            probes: Some(spec.probes()),
            probe_timeout: Some(format_micros(spec.probe_timeout())),
            min_nodes: d.min_nodes,
        })
    }
}

/// A breaker whose strategy the schema cannot write (the library's [`Strategy`] is
/// `non_exhaustive`: a new one needs its name in [`StrategyDoc`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnnamedStrategy(pub String);

impl std::fmt::Display for UnnamedStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the breaker strategy {} has no name in the schema",
            self.0
        )
    }
}

impl std::error::Error for UnnamedStrategy {}

/// A strategy's name, as the schema writes it.
fn strategy_name(s: StrategyDoc) -> &'static str {
    match s {
        StrategyDoc::ErrorRatio => "error_ratio",
        StrategyDoc::SlowCallRatio => "slow_call_ratio",
        StrategyDoc::ErrorCount => "error_count",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names in messages are the schema's.
    #[test]
    fn strategy_names_are_the_schemas() {
        for s in [
            StrategyDoc::ErrorRatio,
            StrategyDoc::SlowCallRatio,
            StrategyDoc::ErrorCount,
        ] {
            assert_eq!(serde_json::to_value(s).unwrap(), strategy_name(s));
        }
    }
}
