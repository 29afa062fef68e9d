//! The input as a decision line writes it: the text of its derived `Serialize`, with the
//! parts that repeat from call to call (tool, caller, client, Zabbix) kept per thread as
//! text, as `convert` keeps them as regorus values. Comparing a part with the one written
//! last costs far less than escaping and writing its dozen strings again.

use std::cell::RefCell;

use serde::Serialize;
use serde::ser::{SerializeStruct, Serializer};
use serde_json::value::{RawValue, to_raw_value};

use crate::policy::input::{CallerInfo, ClientInfo, PolicyInput, ToolInfo, ZabbixInfo};

/// A part as last written on this thread, and its text.
type Kept<T> = Option<(T, Box<RawValue>)>;

#[derive(Default)]
struct Parts {
    tool: Kept<ToolInfo>,
    caller: Kept<CallerInfo>,
    client: Kept<ClientInfo>,
    zabbix: Kept<ZabbixInfo>,
}

thread_local! {
    static PARTS: RefCell<Parts> = RefCell::new(Parts::default());
}

/// `PolicyInput` written as its derived `Serialize` writes it (pinned by a test).
pub(super) struct InputText<'a>(pub(super) &'a PolicyInput);

impl Serialize for InputText<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let input = self.0;
        let optional = usize::from(input.resource.is_some())
            + usize::from(input.targets.is_some())
            + usize::from(input.approver.is_some());
        let mut map = serializer.serialize_struct("PolicyInput", 8 + optional)?;
        map.serialize_field("version", &input.version)?;
        map.serialize_field("phase", &input.phase)?;
        part(&mut map, "tool", &input.tool, |p| &mut p.tool)?;
        map.serialize_field("arguments", &input.arguments)?;
        part(&mut map, "caller", &input.caller, |p| &mut p.caller)?;
        part(&mut map, "client", &input.client, |p| &mut p.client)?;
        part(&mut map, "zabbix", &input.zabbix, |p| &mut p.zabbix)?;
        map.serialize_field("now", &input.now)?;
        if let Some(resource) = &input.resource {
            map.serialize_field("resource", resource)?;
        }
        if let Some(targets) = &input.targets {
            map.serialize_field("targets", targets)?;
        }
        if let Some(approver) = &input.approver {
            map.serialize_field("approver", approver)?;
        }
        map.end()
    }
}

/// Writes `value` as the field `name`, from the text kept for it when it equals the part
/// written last on this thread; otherwise writes it, keeping its text for the next line. A
/// part that cannot be kept (its text not made) is written in place.
fn part<M, T>(
    map: &mut M,
    name: &'static str,
    value: &T,
    slot: fn(&mut Parts) -> &mut Kept<T>,
) -> Result<(), M::Error>
where
    M: SerializeStruct,
    T: Serialize + Clone + PartialEq,
{
    let written = PARTS.with(|parts| {
        let mut parts = parts.try_borrow_mut().ok()?;
        let kept = slot(&mut parts);
        if !matches!(kept, Some((last, _)) if last == value) {
            *kept = Some((value.clone(), to_raw_value(value).ok()?));
        }
        let (_, text) = kept.as_ref()?;
        Some(map.serialize_field(name, &**text))
    });
    match written {
        Some(result) => result,
        None => map.serialize_field(name, value),
    }
}

#[cfg(test)]
mod tests {
    use super::InputText;
    use crate::policy::input::tests::sample_input;
    use crate::policy::input::{ApproverInfo, ResourceInfo, SignIn};

    /// Byte for byte the derived text, for inputs one after another whose parts change,
    /// stay and come back (a kept part never answers for another).
    #[test]
    fn same_text_as_the_derived_serialize() {
        let first = sample_input();
        let mut second = first.clone();
        second.caller.usrgrps.push("Operators \"night\"".into());
        second.client.name = None;
        second.tool.name = "host_get".into();
        second.targets = None;
        second.resource = Some(ResourceInfo {
            uri: "zabbix://host/10084".into(),
            kind: "host".into(),
            id: "10084".into(),
        });
        let mut third = second.clone();
        third.zabbix.version = "6.0.40".into();
        third.caller.userid = "2".into();
        third.approver = Some(ApproverInfo {
            person: first.caller.clone(),
            sign_in: SignIn::Token,
        });
        for input in [&first, &first, &second, &third, &second, &first, &third] {
            let ours = serde_json::to_string(&InputText(input)).expect("ours");
            let derived = serde_json::to_string(input).expect("derived");
            assert_eq!(ours, derived);
        }
    }
}
