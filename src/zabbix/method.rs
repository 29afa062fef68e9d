//! The closed set of Zabbix API methods the sidecar may call.
//!
//! Callers never name a method with a string: a tool definition names one of these,
//! so nothing outside this list can reach Zabbix.

/// A Zabbix JSON-RPC method the sidecar is allowed to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    ApiInfoVersion,
    UserCheckAuthentication,
    HostGroupGet,
    TemplateGroupGet,
    HostGet,
    TemplateGet,
    ItemGet,
    DiscoveryRuleGet,
    HostInterfaceGet,
    UserMacroGet,
    ProblemGet,
    EventGet,
    MaintenanceGet,
    HistoryGet,
    TriggerGet,
    UserGroupGet,
    EventAcknowledge,
    MaintenanceCreate,
    MaintenanceUpdate,
    MaintenanceDelete,
    /// The approval page: an approver's sign-in and sign-out.
    UserLogin,
    UserLogout,
    /// The approval page: Zabbix's `login_attempts`, read with an approver's sign-in.
    SettingsGet,
}

impl Method {
    /// The JSON-RPC method name sent to Zabbix.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::ApiInfoVersion => "apiinfo.version",
            Method::UserCheckAuthentication => "user.checkAuthentication",
            Method::HostGroupGet => "hostgroup.get",
            Method::TemplateGroupGet => "templategroup.get",
            Method::HostGet => "host.get",
            Method::TemplateGet => "template.get",
            Method::ItemGet => "item.get",
            Method::DiscoveryRuleGet => "discoveryrule.get",
            Method::HostInterfaceGet => "hostinterface.get",
            Method::UserMacroGet => "usermacro.get",
            Method::ProblemGet => "problem.get",
            Method::EventGet => "event.get",
            Method::MaintenanceGet => "maintenance.get",
            Method::HistoryGet => "history.get",
            Method::TriggerGet => "trigger.get",
            Method::UserGroupGet => "usergroup.get",
            Method::EventAcknowledge => "event.acknowledge",
            Method::MaintenanceCreate => "maintenance.create",
            Method::MaintenanceUpdate => "maintenance.update",
            Method::MaintenanceDelete => "maintenance.delete",
            Method::UserLogin => "user.login",
            Method::UserLogout => "user.logout",
            Method::SettingsGet => "settings.get",
        }
    }

    /// Methods that Zabbix serves without a token (sending one is an error on some versions).
    pub fn is_anonymous(self) -> bool {
        matches!(
            self,
            Method::ApiInfoVersion | Method::UserCheckAuthentication | Method::UserLogin
        )
    }

    /// Whether the method changes Zabbix state. Writes are never retried.
    pub fn is_write(self) -> bool {
        matches!(
            self,
            Method::EventAcknowledge
                | Method::MaintenanceCreate
                | Method::MaintenanceUpdate
                | Method::MaintenanceDelete
                | Method::UserLogin
                | Method::UserLogout
        )
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
