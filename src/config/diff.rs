//! Which parameters differ between two configurations: what a reload (SIGHUP) reads
//! from the file against what runs.
//!
//! Parameters are compared by their effective values as `-T` renders them, with three
//! additions the rendering cannot show: secrets are compared by their bytes (they render
//! as `***`), the address lists by what their names resolve to now (a DNS name in
//! `AllowedIP` may point elsewhere than at start), and the exposure rules per parameter
//! and as one ordered list (their order decides).

use super::params::{Arity, Param};
use super::render;
use super::{Config, Secret};

/// The parameters whose effective values differ, in table order.
pub fn changed(old: &Config, new: &Config) -> Vec<Param> {
    let rules_reordered = rule_lines(old, None) != rule_lines(new, None);
    Param::all()
        .filter(|param| match param.arity() {
            Arity::Include => false,
            Arity::Rule => {
                let own = rule_lines(old, Some(*param)) != rule_lines(new, Some(*param));
                // The same rules in another order: each rule parameter given says so.
                own || (rules_reordered && !rule_lines(new, Some(*param)).is_empty())
            }
            Arity::Single | Arity::List => differs(old, new, *param),
        })
        .collect()
}

fn differs(old: &Config, new: &Config, param: Param) -> bool {
    if render::value(old, param) != render::value(new, param) {
        return true;
    }
    match param {
        Param::AllowedIp => old.allowed_ip != new.allowed_ip,
        Param::ApprovalAllowedIp => {
            old.approval_page.as_ref().map(|p| &p.allowed_ip)
                != new.approval_page.as_ref().map(|p| &p.allowed_ip)
        }
        Param::ApprovalSealKey => secret(&old.approval_seal_key) != secret(&new.approval_seal_key),
        // A URL read from a file changed with the file: named as the file.
        Param::SharedStore => {
            new.shared_store_file.is_none()
                && secret(&old.shared_store) != secret(&new.shared_store)
        }
        Param::SharedStoreFile => {
            new.shared_store_file.is_some()
                && secret(&old.shared_store) != secret(&new.shared_store)
        }
        _ => false,
    }
}

fn secret(value: &Option<Secret>) -> Option<&[u8]> {
    value.as_ref().map(Secret::expose)
}

/// The exposure rules as written (`DenyTool=x`), of one parameter or all in order.
fn rule_lines(config: &Config, only: Option<Param>) -> Vec<String> {
    config
        .tool_rules
        .iter()
        .filter(|rule| only.is_none_or(|param| rule.parameter_name() == param.name()))
        .map(ToString::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::changed;
    use crate::config::{Config, FlagValue, Param, Sources};

    fn config(extra: &[(Param, &str)]) -> Config {
        let mut flags = vec![
            FlagValue::new(Param::FrontendUrl, "http://127.0.0.1:1/"),
            FlagValue::new(Param::AllowedIp, "127.0.0.1"),
        ];
        flags.extend(extra.iter().map(|(p, v)| FlagValue::new(*p, *v)));
        Config::load(&Sources {
            flags,
            ..Sources::default()
        })
        .expect("valid configuration")
    }

    #[test]
    fn nothing_changed() {
        let one = config(&[(Param::DenyTool, "host_*"), (Param::RateLimit, "60/60")]);
        let two = config(&[(Param::DenyTool, "host_*"), (Param::RateLimit, "60/60")]);
        assert!(changed(&one, &two).is_empty());
    }

    #[test]
    fn each_changed_parameter_is_named_in_table_order() {
        let one = config(&[(Param::Timeout, "10"), (Param::DenyTool, "host_*")]);
        let two = config(&[
            (Param::Timeout, "20"),
            (Param::AllowedIp, "127.0.0.1,10.0.0.0/8"),
            (Param::DenyToolRegexp, "^problem_"),
            (Param::DenyTool, "host_*"),
            (Param::MaxConcurrent, "4"),
        ]);
        assert_eq!(
            changed(&one, &two),
            vec![
                Param::AllowedIp,
                Param::Timeout,
                Param::DenyTool,
                Param::DenyToolRegexp,
                Param::MaxConcurrent
            ]
        );
    }

    #[test]
    fn rules_in_another_order_are_a_change() {
        let one = config(&[(Param::AllowTool, "host_get"), (Param::DenyTool, "host_*")]);
        let two = config(&[(Param::DenyTool, "host_*"), (Param::AllowTool, "host_get")]);
        assert_eq!(changed(&one, &two), vec![Param::AllowTool, Param::DenyTool]);
    }

    #[test]
    fn a_secret_is_compared_by_its_bytes() {
        let key = (Param::ApprovalSealKey, &*"ab".repeat(32));
        let one = config(&[(Param::SharedStore, "redis://:one@127.0.0.1:6390/"), key]);
        let two = config(&[(Param::SharedStore, "redis://:two@127.0.0.1:6390/"), key]);
        assert_eq!(changed(&one, &two), vec![Param::SharedStore]);
    }
}
