//! A shaped queue: [`QueueDoc`] to the core's [`QueueSpec`] and back.

use flowgate_core::Quota;
use flowgate_core::clock::micros;
use flowgate_core::queue::{self as d, QueueSpec, QueueSpecError};
use flowgate_core::quota::format_micros;

use super::{SchemaError, domain_of, duration_of, err, name_of, pattern_doc, pattern_of};
use crate::schema::QueueDoc;

impl QueueDoc {
    /// The queue, its domain the file's (`file_domain`) unless it names its own.
    ///
    /// # Errors
    /// [`SchemaError`] naming the field at fault.
    pub(crate) fn to_spec(&self, file_domain: Option<&str>) -> Result<QueueSpec, SchemaError> {
        name_of("queue", "name", &self.name)?;
        let domain = domain_of(self.domain.as_deref(), file_domain, "queue")?;
        let pattern = pattern_of(&self.pattern, false, false)?;
        let rate = self
            .rate
            .parse::<Quota>()
            .map_err(|e| err("rate", e.to_string()))?;
        let fail = |field: &'static str| move |e: QueueSpecError| err(field, e.to_string());
        let mut spec =
            QueueSpec::new(domain, self.name.clone(), pattern, rate).map_err(fail("rate"))?;
        if let Some(b) = self.burst {
            spec = spec.with_burst(b).map_err(fail("burst"))?;
        }
        if let Some(m) = self.max_depth {
            spec = spec.with_max_depth(m).map_err(fail("max_depth"))?;
        }
        if let Some(l) = &self.lease {
            spec = spec
                .with_lease(duration_of("lease", l)?)
                .map_err(fail("lease"))?;
        }
        if let Some(m) = self.max_attempts {
            spec = spec.with_max_attempts(m).map_err(fail("max_attempts"))?;
        }
        if let Some(b) = &self.retry_backoff {
            spec = spec
                .with_retry_backoff(duration_of("retry_backoff", b)?)
                .map_err(fail("retry_backoff"))?;
        }
        if let Some(m) = self.max_payload {
            spec = spec.with_max_payload(m).map_err(fail("max_payload"))?;
        }
        if let Some(r) = &self.key_retention {
            spec = spec
                .with_key_retention(duration_of("key_retention", r)?)
                .map_err(fail("key_retention"))?;
        }
        Ok(spec)
    }
}

impl QueueDoc {
    /// The document of a queue: converting it back gives the same queue (bounds at their
    /// defaults left out).
    pub fn of(q: &QueueSpec) -> Self {
        let unless = |v: u64, default: u64| (v != default).then(|| format_micros(v));
        QueueDoc {
            domain: Some(q.domain.clone()),
            name: q.name.clone(),
            pattern: pattern_doc(&q.pattern),
            rate: q.rate().to_string(),
            burst: (q.burst() != 1).then(|| q.burst()),
            max_depth: (q.max_depth() != d::DEFAULT_MAX_DEPTH).then(|| q.max_depth()),
            lease: unless(q.lease(), micros(d::DEFAULT_LEASE)),
            max_attempts: (q.max_attempts() != d::DEFAULT_MAX_ATTEMPTS).then(|| q.max_attempts()),
            retry_backoff: unless(q.retry_backoff(), micros(d::DEFAULT_RETRY_BACKOFF)),
            max_payload: (q.max_payload() != d::DEFAULT_MAX_PAYLOAD).then(|| q.max_payload()),
            key_retention: unless(q.key_retention(), micros(d::DEFAULT_KEY_RETENTION)),
        }
    }
}
