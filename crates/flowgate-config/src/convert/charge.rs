//! A rule's `charge`: what a gRPC request's cost means under it ([`ChargeMode`]).

use flowgate_core::ChargeMode;

use super::{SchemaError, err};
use crate::schema::{ChargeDoc, RuleDoc};

impl RuleDoc {
    /// The rule's `charge`: `report` only on a limit that takes charges.
    pub(super) fn charge_mode(
        &self,
        limit: Option<&flowgate_core::Limit>,
    ) -> Result<ChargeMode, SchemaError> {
        match (self.charge, limit) {
            (None | Some(ChargeDoc::Check), _) => Ok(ChargeMode::Check),
            (Some(ChargeDoc::Report), None) => Err(err(
                "charge",
                "charge = \"report\" needs a limit to charge: an unlimited rule counts nothing",
            )),
            (Some(ChargeDoc::Report), Some(l)) => {
                flowgate_core::algorithm::chargeable(l).map_err(|e| {
                    err(
                        "charge",
                        format!("charge = \"report\" needs a rule that takes charges: {e}"),
                    )
                })?;
                Ok(ChargeMode::Report)
            }
        }
    }
}
