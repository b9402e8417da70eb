//! What both protocols check of a request, once, before the limiter sees it: its bounds, so that
//! no input can exhaust the server (over a bound, the request is refused with a message naming it:
//! HTTP 400/413, gRPC `INVALID_ARGUMENT`/`OUT_OF_RANGE`, and the server goes on answering);
//! and the cost a request's `hits_addend` stands for.

use flowgate::Request;

/// The largest HTTP request body, and the largest gRPC message (64 KiB).
pub(crate) const MAX_BODY_BYTES: usize = 64 * 1024;
/// The most descriptors in one request.
pub(crate) const MAX_DESCRIPTORS: usize = 64;
/// The most entries in one descriptor.
pub(crate) const MAX_ENTRIES: usize = 32;
/// The longest domain, key or value, in bytes.
pub(crate) const MAX_TEXT_BYTES: usize = 1024;
/// The largest cost (`hits_addend`): 2^32 - 1, the largest limit.
pub(crate) const MAX_COST: u64 = flowgate::rule::MAX_LIMIT;

/// Why a request was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum InputError {
    /// No domain.
    #[error("the domain must not be empty")]
    EmptyDomain,
    /// No descriptor.
    #[error("the request must carry at least one descriptor")]
    NoDescriptors,
    /// Too many descriptors.
    #[error("{count} descriptors: at most {MAX_DESCRIPTORS} are allowed in one request")]
    TooManyDescriptors {
        /// How many were sent.
        count: usize,
    },
    /// Too many entries in a descriptor.
    #[error("descriptor {index} has {count} entries: at most {MAX_ENTRIES} are allowed")]
    TooManyEntries {
        /// The descriptor's index.
        index: usize,
        /// How many entries it has.
        count: usize,
    },
    /// A descriptor entry with an empty key.
    #[error("descriptor {index} has an entry with an empty key")]
    EmptyKey {
        /// The descriptor's index.
        index: usize,
    },
    /// A domain, key or value too long.
    #[error("{what} is {len} bytes long: at most {MAX_TEXT_BYTES} are allowed")]
    TooLong {
        /// Which text.
        what: String,
        /// The field that holds it, as a body names it (`descriptors[1].entries[0].key`).
        field: String,
        /// Its length.
        len: usize,
    },
    /// A cost above [`MAX_COST`].
    #[error("cost {cost} is above the maximum of {MAX_COST}")]
    CostTooLarge {
        /// The cost.
        cost: u64,
        /// The field that gives it (`cost`, `descriptors[1].hits_addend`).
        field: String,
    },
}

/// The cost of a request whose `hits_addend` is `addend`: 0, or none, means 1, as in Envoy. (A
/// descriptor's own `hits_addend` is its cost as it is: 0 only looks.)
pub(crate) fn request_cost(addend: Option<u64>) -> u64 {
    match addend {
        Some(h) if h > 0 => h,
        _ => 1,
    }
}

impl InputError {
    /// The request's field at fault, as a body names it (`domain`, `descriptors[1].entries`).
    pub(crate) fn field(&self) -> String {
        match self {
            InputError::EmptyDomain => "domain".to_owned(),
            InputError::NoDescriptors | InputError::TooManyDescriptors { .. } => {
                "descriptors".to_owned()
            }
            InputError::TooManyEntries { index, .. } | InputError::EmptyKey { index } => {
                format!("descriptors[{index}].entries")
            }
            InputError::TooLong { field, .. } | InputError::CostTooLarge { field, .. } => {
                field.clone()
            }
        }
    }
}

/// The cost of a check that gives `hits_addend` and `cost`: `cost` exactly when given (0 only
/// looks), else [`request_cost`] of `hits_addend`.
pub(crate) fn check_cost(hits_addend: Option<u64>, cost: Option<u64>) -> u64 {
    cost.unwrap_or_else(|| request_cost(hits_addend))
}

/// Checks a request against the bounds.
///
/// # Errors
/// The first bound the request exceeds.
pub(crate) fn validate(req: &Request) -> Result<(), InputError> {
    if req.domain.is_empty() {
        return Err(InputError::EmptyDomain);
    }
    if req.domain.len() > MAX_TEXT_BYTES {
        return Err(InputError::TooLong {
            what: "the domain".into(),
            field: "domain".into(),
            len: req.domain.len(),
        });
    }
    if req.descriptors.is_empty() {
        return Err(InputError::NoDescriptors);
    }
    if req.descriptors.len() > MAX_DESCRIPTORS {
        return Err(InputError::TooManyDescriptors {
            count: req.descriptors.len(),
        });
    }
    if req.cost > MAX_COST {
        return Err(InputError::CostTooLarge {
            cost: req.cost,
            field: "cost".to_owned(),
        });
    }
    for (i, d) in req.descriptors.iter().enumerate() {
        if d.entries.len() > MAX_ENTRIES {
            return Err(InputError::TooManyEntries {
                index: i,
                count: d.entries.len(),
            });
        }
        if let Some(c) = d.cost.filter(|&c| c > MAX_COST) {
            return Err(InputError::CostTooLarge {
                cost: c,
                field: format!("descriptors[{i}].hits_addend"),
            });
        }
        for e in &d.entries {
            if e.key.is_empty() {
                return Err(InputError::EmptyKey { index: i });
            }
            if e.key.len() > MAX_TEXT_BYTES {
                return Err(InputError::TooLong {
                    what: format!("a key of descriptor {i}"),
                    field: format!("descriptors[{i}].entries"),
                    len: e.key.len(),
                });
            }
            if e.value.len() > MAX_TEXT_BYTES {
                return Err(InputError::TooLong {
                    what: format!("the value of `{}` in descriptor {i}", e.key),
                    field: format!("descriptors[{i}].entries"),
                    len: e.value.len(),
                });
            }
        }
    }
    Ok(())
}
