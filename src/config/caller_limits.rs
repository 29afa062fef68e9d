//! `RateLimit` and `MaxConcurrent`: per-caller ceilings over every call, whatever the
//! policy's `rate` says (the stricter one refuses; see [`crate::ratelimit`]).

use std::num::NonZeroU32;

use super::error::ConfigError;
use super::merge::Resolved;
use super::params::Param;
use super::values;
use crate::ratelimit::{CallRate, MAX_CONCURRENT};

/// The ceilings; `None` (the default, or an empty value) sets none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallerLimits {
    /// `RateLimit=<calls>/<seconds>`, e.g. `600/60`.
    pub rate_limit: Option<CallRate>,
    /// `MaxConcurrent`: calls of one caller in flight at once.
    pub max_concurrent: Option<NonZeroU32>,
}

pub fn build(r: &Resolved) -> Result<CallerLimits, ConfigError> {
    let rate_limit = match r.get(Param::RateLimit).filter(|e| !e.value.is_empty()) {
        Some(e) => Some(
            CallRate::parse(&e.value)
                .map_err(|reason| ConfigError::bad_value(&e.at(), &e.value, reason))?,
        ),
        None => None,
    };
    let max_concurrent = match r.get(Param::MaxConcurrent).filter(|e| !e.value.is_empty()) {
        Some(e) => {
            let n = values::integer(&e.at(), &e.value, 1, u64::from(MAX_CONCURRENT))?;
            u32::try_from(n).ok().and_then(NonZeroU32::new)
        }
        None => None,
    };
    Ok(CallerLimits {
        rate_limit,
        max_concurrent,
    })
}

/// The `-T` value of `RateLimit` or `MaxConcurrent` (empty when unset).
pub fn render(limits: &CallerLimits, param: Param) -> Option<String> {
    match param {
        Param::RateLimit => Some(limits.rate_limit.map(|r| r.to_string()).unwrap_or_default()),
        Param::MaxConcurrent => Some(
            limits
                .max_concurrent
                .map(|c| c.to_string())
                .unwrap_or_default(),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use crate::config::{Config, ConfigError, EnvContract, FlagValue, Param, Sources};

    fn load(extra: &[(Param, &str)], env: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let mut flags = vec![
            FlagValue::new(Param::FrontendUrl, "http://127.0.0.1/"),
            FlagValue::new(Param::AllowedIp, "127.0.0.1"),
        ];
        flags.extend(extra.iter().map(|(p, v)| FlagValue::new(*p, *v)));
        Config::load(&Sources {
            config_file: None,
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>(),
            flags,
            env_contract: EnvContract::Guard,
        })
    }

    #[test]
    fn unset_by_default() {
        let c = load(&[], &[]).unwrap();
        assert_eq!(c.caller_limits, super::CallerLimits::default());
        let text = c.render_effective();
        assert!(text.contains("\nRateLimit=\n"), "{text}");
        assert!(text.contains("\nMaxConcurrent=\n"), "{text}");
    }

    #[test]
    fn read_from_flags_and_variables_and_rendered() {
        let c = load(
            &[(Param::RateLimit, "600/60")],
            &[("ZABBIX_MCP_GUARD_MAX_CONCURRENT", "4")],
        )
        .unwrap();
        let rate = c.caller_limits.rate_limit.expect("rate");
        assert_eq!((rate.calls(), rate.per_seconds()), (600, 60));
        assert_eq!(c.caller_limits.max_concurrent.map(|n| n.get()), Some(4));
        let text = c.render_effective();
        assert!(text.contains("\nRateLimit=600/60\n"), "{text}");
        assert!(text.contains("\nMaxConcurrent=4\n"), "{text}");
        assert_eq!(Param::RateLimit.flag(), "rate-limit");
        assert_eq!(
            Param::MaxConcurrent.env_var(),
            "ZABBIX_MCP_GUARD_MAX_CONCURRENT"
        );
    }

    #[test]
    fn bad_values_name_the_parameter_and_the_syntax() {
        for bad in ["600", "0/60", "600/0", "10/s", "abc"] {
            let err = load(&[(Param::RateLimit, bad)], &[])
                .unwrap_err()
                .to_string();
            assert!(err.contains("--rate-limit"), "{bad}: {err}");
            assert!(err.contains("<calls>/<seconds>"), "{bad}: {err}");
        }
        for bad in ["0", "-1", "x", "10001"] {
            let err = load(&[(Param::MaxConcurrent, bad)], &[])
                .unwrap_err()
                .to_string();
            assert!(err.contains("--max-concurrent"), "{bad}: {err}");
        }
    }
}
