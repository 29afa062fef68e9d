#!/usr/bin/env python3
"""Idempotent seed dataset for the Zabbix lab (stdlib only).

usage: seed.py /var/lib/zbx-test/zabbix6.env           (or zabbix7.env; written by start-zabbix.sh)
       seed.py --purge /var/lib/zbx-test/zabbix6.env   delete everything the seed creates (+ manifest)

Every object is looked up by name and created only if missing (or updated to the wanted state), so
re-running never duplicates anything. Works on 6.0 (token in body `auth`) and 6.4+/7.0 (Bearer).
Writes the manifest $ZBX_STATE_DIR/seedV.json and sets ZBX_TOKEN_OPERATOR, ZBX_TOKEN_VIEWER,
ZBX_SEED_MANIFEST in the env file. See README.md for the dataset.

Env knobs:
  ZBX_SEED_HISTORY_REFRESH  seconds (default 1800): the 10-value history series per item is pushed
                            again when the last pushed series is older than this (0 = every run)
  ZBX_DISABLE_DEFAULT_HOST  1 (default): keep the 'Zabbix server' host disabled
"""
import json
import os
import sys
import time

sys.dont_write_bytecode = True  # keep deploy/lab free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from zbxlab import Api, ApiError, load_env, port_open, send_values, sender_counts, update_env  # noqa: E402

PASSWORD = "McpTest-2026!"
TOKEN_NAME = "mcp-seed"
HG_LINUX, HG_DB, HG_NET = "MCP/Linux servers", "MCP/Databases", "MCP/Network"
TG_BASE, TG_APPS = "MCP Templates", "MCP Templates/Apps"
T_APP, T_BASE = "MCP App Template", "MCP Base Template"
WEB1 = "mcp-web-01"
TRIG_FLOAT, TRIG_UINT = "MCP float too high", "MCP uint too high"
MAINT = "MCP planned maintenance"
DESC = "Seeded by deploy/lab/seed.py (zabbix-mcp-guard test dataset)"

AGENT_IF = {"type": "1", "main": "1", "useip": "1", "ip": "127.0.0.1", "dns": "", "port": "10050"}
SNMP_IF = {"type": "2", "main": "1", "useip": "1", "ip": "127.0.0.1", "dns": "", "port": "161",
           "details": {"version": "2", "bulk": "1", "community": "{$SNMP_COMMUNITY}"}}

TEMPLATES = [  # name, group, items [(key, name, value_type)], triggers [(description, expression, priority, manual_close)]
    (T_BASE, TG_BASE, [("mcp.base.heartbeat", "MCP heartbeat", 3)], []),
    (T_APP, TG_APPS, [("mcp.app.status", "MCP app status", 3)],
     [("MCP app is down", f"last(/{T_APP}/mcp.app.status)=0", 4, 0)]),
]

HOSTS = [  # host, visible name, group, tags, interface, templates, items, triggers
    (WEB1, "MCP Web 01", HG_LINUX, {"role": "web", "env": "prod"}, AGENT_IF, [T_BASE, T_APP],
     [("mcp.float", "MCP float", 0), ("mcp.char", "MCP character", 1), ("mcp.log", "MCP log", 2),
      ("mcp.uint", "MCP unsigned", 3), ("mcp.text", "MCP text", 4)],
     [(TRIG_FLOAT, f"last(/{WEB1}/mcp.float)>100", 3, 1),
      (TRIG_UINT, f"last(/{WEB1}/mcp.uint)>1000", 4, 0)]),
    ("mcp-web-02", "MCP Web 02", HG_LINUX, {"role": "web", "env": "staging"}, AGENT_IF, [T_BASE, T_APP],
     [("mcp.web.requests", "MCP web requests", 3)], []),
    ("mcp-db-01", "MCP DB 01", HG_DB, {"role": "db", "env": "prod"}, AGENT_IF, [T_BASE],
     [("mcp.db.connections", "MCP db connections", 3)],
     [("MCP db connections high", "last(/mcp-db-01/mcp.db.connections)>500", 2, 1)]),
    ("mcp-db-02", "MCP DB 02", HG_DB, {"role": "db", "env": "staging"}, AGENT_IF, [T_BASE],
     [("mcp.db.connections", "MCP db connections", 3)], []),
    ("mcp-sw-01", "MCP Switch 01", HG_NET, {"role": "network", "env": "prod"}, SNMP_IF, [T_BASE],
     [("mcp.sw.ports.up", "MCP switch ports up", 3)], []),
]

HOST_MACROS = [(WEB1, "{$MCP_THRESHOLD}", "80", 0), (WEB1, "{$MCP_SECRET_TEXT}", "hello", 1)]  # type 1 = secret
GLOBAL_MACROS = [("{$MCP_GLOBAL}", "1", True), ("{$SNMP_COMMUNITY}", "public", False)]  # force value?

USERS = [  # username, roleid, user group, [(host group, permission)]  (2 = read, 3 = read-write)
    ("mcp-operator", "2", "MCP Operators", [(HG_LINUX, 3)], "Operator", "ZBX_TOKEN_OPERATOR"),
    ("mcp-viewer", "1", "MCP Viewers", [(HG_LINUX, 2), (HG_DB, 2)], "Viewer", "ZBX_TOKEN_VIEWER"),
]


# history series: 10 distinct values per key on mcp-web-01, oldest first. float/uint stay above the
# trigger thresholds so both triggers fire (and stay in PROBLEM) while the series is processed.
def series_values(key):
    return {
        "mcp.float": [round(101.25 + 1.5 * i, 2) for i in range(10)],
        "mcp.char": [f"char-{i + 1:02d}" for i in range(10)],
        "mcp.log": [f"mcp log line {i + 1:02d}: event {chr(97 + i)}" for i in range(10)],
        "mcp.uint": [1010 + 10 * i for i in range(10)],
        "mcp.text": [f"mcp text value {i + 1:02d}\nsecond line of value {i + 1:02d}" for i in range(10)],
    }[key]


HISTORY_KEYS = ["mcp.float", "mcp.char", "mcp.log", "mcp.uint", "mcp.text"]
FIRE = {TRIG_FLOAT: ("mcp.float", 50.5, 150.5), TRIG_UINT: ("mcp.uint", 500, 5000)}  # key, low, high


def log(msg):
    print(f"[seed{MAJOR}] {msg}", file=sys.stderr, flush=True)


def ids(objs, key):
    return sorted(str(o[key]) for o in objs)


class Seeder:
    def __init__(self, api):
        self.api = api
        self.v7 = api.major >= (6, 2)  # templategroup.*, hostgroup_rights, selectHostGroups
        self.changes = []
        self.items_cache, self.triggers_cache = {}, {}
        self.last_change = 0.0

    def call(self, method, params):
        return self.api.call(method, params)

    def changed(self, what):
        self.changes.append(what)
        self.last_change = time.time()
        log(what)

    # ---------------------------------------------------------------- groups
    def groups(self, names, kind="hostgroup"):
        r = self.call(f"{kind}.get", {"output": ["groupid", "name"], "filter": {"name": names}})
        have = {g["name"]: g["groupid"] for g in r}
        for n in names:
            if n not in have:
                self.changed(f"created {kind} {n}")
                have[n] = self.call(f"{kind}.create", {"name": n})["groupids"][0]
        return {n: have[n] for n in names}

    # ---------------------------------------------------------------- items / triggers (hosts and templates)
    def prefetch_items(self, hostids):
        r = self.call("item.get", {"hostids": hostids, "search": {"key_": "mcp."}, "startSearch": True,
                                   "output": ["itemid", "hostid", "key_", "name", "type", "value_type", "status",
                                              "templateid"]})
        self.items_cache = {(i["hostid"], i["key_"]): i for i in r}
        return r

    def prefetch_triggers(self, hostids):
        r = self.call("trigger.get", {"hostids": hostids, "search": {"description": "MCP "}, "startSearch": True,
                                      "expandExpression": True, "selectHosts": ["hostid"],
                                      "output": ["triggerid", "description", "expression", "priority",
                                                 "manual_close", "status", "templateid"]})
        self.triggers_cache = {(h["hostid"], t["description"]): t for t in r for h in t["hosts"]}
        return r

    def item(self, hostid, key, name, value_type, owner):
        want = {"name": name, "type": "2", "value_type": str(value_type), "status": "0"}
        it = self.items_cache.get((hostid, key))
        if not it:
            self.changed(f"created item {owner}:{key}")
            return self.call("item.create", {"hostid": hostid, "key_": key, **want,
                                             "description": DESC})["itemids"][0]
        diff = {k: v for k, v in want.items() if str(it[k]) != v}
        if diff and it["templateid"] == "0":
            self.changed(f"updated item {owner}:{key} {diff}")
            self.call("item.update", {"itemid": it["itemid"], **diff})
        return it["itemid"]

    def trigger(self, hostid, desc, expr, priority, manual_close, owner):
        want = {"priority": str(priority), "manual_close": str(manual_close), "status": "0"}
        t = self.triggers_cache.get((hostid, desc))
        if not t:
            self.changed(f"created trigger {owner}:{desc}")
            return self.call("trigger.create", {"description": desc, "expression": expr, **want,
                                                "comments": DESC})["triggerids"][0]
        diff = {k: v for k, v in want.items() if str(t[k]) != v}
        if t["expression"].replace(" ", "") != expr.replace(" ", ""):
            diff["expression"] = expr
        if diff and t["templateid"] == "0":
            self.changed(f"updated trigger {owner}:{desc} {diff}")
            self.call("trigger.update", {"triggerid": t["triggerid"], **diff})
        return t["triggerid"]

    # ---------------------------------------------------------------- templates
    def templates(self, specs):
        """specs: {name: groupid}"""
        sel = "selectTemplateGroups" if self.v7 else "selectGroups"
        r = self.call("template.get", {"output": ["templateid", "host"], "filter": {"host": list(specs)},
                                       sel: ["groupid"]})
        have = {t["host"]: t for t in r}
        out = {}
        for name, groupid in specs.items():
            t = have.get(name)
            if not t:
                self.changed(f"created template {name}")
                out[name] = self.call("template.create", {"host": name, "name": name, "description": DESC,
                                                          "groups": [{"groupid": groupid}]})["templateids"][0]
                continue
            if ids(t["templategroups" if self.v7 else "groups"], "groupid") != [groupid]:
                self.changed(f"updated template {name} groups")
                self.call("template.update", {"templateid": t["templateid"], "groups": [{"groupid": groupid}]})
            out[name] = t["templateid"]
        return out

    # ---------------------------------------------------------------- hosts
    def prefetch_hosts(self, names):
        sel = "selectHostGroups" if self.v7 else "selectGroups"
        r = self.call("host.get", {"output": ["hostid", "host", "name", "status"], "filter": {"host": names},
                                   sel: ["groupid"], "selectTags": ["tag", "value"],
                                   "selectParentTemplates": ["templateid"], "selectInterfaces": "extend"})
        return {h["host"]: h for h in r}

    def host(self, h, host, name, groupid, tags, iface, templateids):
        want_tags = [{"tag": k, "value": v} for k, v in sorted(tags.items())]
        if not h:
            self.changed(f"created host {host}")
            return self.call("host.create", {
                "host": host, "name": name, "description": DESC, "status": 0,
                "groups": [{"groupid": groupid}], "tags": want_tags, "interfaces": [iface],
                "templates": [{"templateid": t} for t in templateids]})["hostids"][0]
        upd = {}
        if h["name"] != name:
            upd["name"] = name
        if h["status"] != "0":
            upd["status"] = 0
        if ids(h["hostgroups" if self.v7 else "groups"], "groupid") != [groupid]:
            upd["groups"] = [{"groupid": groupid}]
        if sorted((t["tag"], t["value"]) for t in h["tags"]) != sorted(tags.items()):
            upd["tags"] = want_tags
        if ids(h["parentTemplates"], "templateid") != sorted(templateids):
            upd["templates"] = [{"templateid": t} for t in templateids]  # replaces the linked set
        if upd:
            self.changed(f"updated host {host} {sorted(upd)}")
            self.call("host.update", {"hostid": h["hostid"], **upd})
        cur = [i for i in h["interfaces"] if i["type"] == iface["type"] and i["main"] == "1"]
        if not cur:
            self.changed(f"created {host} interface type {iface['type']}")
            self.call("hostinterface.create", {"hostid": h["hostid"], **iface})
        else:
            i = cur[0]
            bad = any(str(i.get(k)) != v for k, v in iface.items() if k != "details")
            bad |= any(str((i.get("details") or {}).get(k)) != v for k, v in iface.get("details", {}).items())
            if bad:
                self.changed(f"updated {host} interface {i['interfaceid']}")
                self.call("hostinterface.update", {"interfaceid": i["interfaceid"], **iface})
        return h["hostid"]

    # ---------------------------------------------------------------- LLD
    def lld(self, hostid):
        r = self.call("discoveryrule.get", {"hostids": [hostid], "filter": {"key_": ["mcp.discovery"]},
                                            "output": ["itemid", "type", "status"]})
        if r:
            ruleid = r[0]["itemid"]
            if r[0]["type"] != "2" or r[0]["status"] != "0":
                self.changed("updated LLD rule mcp.discovery")
                self.call("discoveryrule.update", {"itemid": ruleid, "type": 2, "status": 0})
        else:
            self.changed("created LLD rule mcp.discovery")
            ruleid = self.call("discoveryrule.create", {"hostid": hostid, "name": "MCP discovery",
                                                        "key_": "mcp.discovery", "type": 2,
                                                        "description": DESC})["itemids"][0]
        pkey = "mcp.disc.value[{#NAME}]"
        p = self.call("itemprototype.get", {"discoveryids": [ruleid], "filter": {"key_": [pkey]},
                                            "output": ["itemid"]})
        if p:
            protoid = p[0]["itemid"]
        else:
            self.changed(f"created item prototype {pkey}")
            protoid = self.call("itemprototype.create", {"hostid": hostid, "ruleid": ruleid, "key_": pkey,
                                                         "name": "MCP discovered value {#NAME}", "type": 2,
                                                         "value_type": 3})["itemids"][0]
        return ruleid, {pkey: protoid}

    # ---------------------------------------------------------------- macros
    def host_macros(self, hosts):
        """hosts: {host: hostid}; wanted: HOST_MACROS -> {host: {macro: hostmacroid}}"""
        r = self.call("usermacro.get", {"hostids": list(hosts.values()), "filter": {"macro": [m[1] for m in HOST_MACROS]},
                                        "output": ["hostmacroid", "hostid", "macro", "value", "type"]})
        have = {(m["hostid"], m["macro"]): m for m in r}
        out = {}
        for host, macro, value, mtype in HOST_MACROS:
            hid = hosts[host]
            want = {"value": value, "type": mtype, "description": DESC}
            m = have.get((hid, macro))
            if not m:
                self.changed(f"created host macro {host}:{macro}")
                mid = self.call("usermacro.create", {"hostid": hid, "macro": macro, **want})["hostmacroids"][0]
            else:
                mid = m["hostmacroid"]
                # secret values are write-only (the API never returns them): compare what we can see
                if str(m["type"]) != str(mtype) or (mtype != 1 and m.get("value") != value):
                    self.changed(f"updated host macro {host}:{macro}")
                    self.call("usermacro.update", {"hostmacroid": mid, **want})
            out.setdefault(host, {})[macro] = mid
        return out

    def global_macros(self):
        r = self.call("usermacro.get", {"globalmacro": True, "filter": {"macro": [m[0] for m in GLOBAL_MACROS]},
                                        "output": ["globalmacroid", "macro", "value", "type"]})
        have = {m["macro"]: m for m in r}
        out = {}
        for macro, value, force in GLOBAL_MACROS:
            m = have.get(macro)
            if not m:
                self.changed(f"created global macro {macro}")
                out[macro] = self.call("usermacro.createglobal", {"macro": macro, "value": value,
                                                                  "description": DESC})["globalmacroids"][0]
                continue
            if force and m.get("value") != value:
                self.changed(f"updated global macro {macro}")
                self.call("usermacro.updateglobal", {"globalmacroid": m["globalmacroid"], "value": value})
            out[macro] = m["globalmacroid"]
        return out

    # ---------------------------------------------------------------- maintenance
    def maintenance(self, hostid):
        sel = "selectHostGroups" if self.v7 else "selectGroups"
        r = self.call("maintenance.get", {"filter": {"name": [MAINT]}, "output": "extend", "selectHosts": ["hostid"],
                                          sel: ["groupid"], "selectTimeperiods": "extend"})
        now = int(time.time())
        since, till = now - 3600, now + 30 * 86400
        want = {"name": MAINT, "description": DESC, "maintenance_type": 0,
                "active_since": since, "active_till": till, "hosts": [{"hostid": hostid}], "groups": [],
                "timeperiods": [{"timeperiod_type": 0, "start_date": since, "period": till - since}]}
        if not r:
            self.changed(f"created maintenance {MAINT}")
            return self.call("maintenance.create", want)["maintenanceids"][0]
        m = r[0]
        tps = m["timeperiods"]
        ok = (ids(m["hosts"], "hostid") == [hostid] and not m["hostgroups" if self.v7 else "groups"]
              and m["maintenance_type"] == "0" and len(tps) == 1 and tps[0]["timeperiod_type"] == "0"
              and int(m["active_since"]) <= now - 600 and int(m["active_till"]) >= now + 7 * 86400
              and int(tps[0]["start_date"]) <= now - 600
              and int(tps[0]["start_date"]) + int(tps[0]["period"]) >= now + 7 * 86400)
        if not ok:  # wrong or about to expire: reset the window to now-1h .. now+30d
            self.changed(f"updated maintenance {MAINT}")
            want.pop("name")
            self.call("maintenance.update", {"maintenanceid": m["maintenanceid"], **want})
        return m["maintenanceid"]

    # ---------------------------------------------------------------- users + tokens
    def usergroups(self, specs):
        """specs: {name: [(hostgroupid, permission)]} -> {name: usrgrpid}"""
        rk, sel = ("hostgroup_rights", "selectHostGroupRights") if self.v7 else ("rights", "selectRights")
        r = self.call("usergroup.get", {"filter": {"name": list(specs)}, "output": ["usrgrpid", "name", "users_status"],
                                        sel: "extend"})
        have = {g["name"]: g for g in r}
        out = {}
        for name, rights in specs.items():
            want = [{"id": gid, "permission": perm} for gid, perm in rights]
            g = have.get(name)
            if not g:
                self.changed(f"created user group {name}")
                out[name] = self.call("usergroup.create", {"name": name, rk: want})["usrgrpids"][0]
                continue
            if (sorted((x["id"], str(x["permission"])) for x in g[rk]) != sorted((i, str(p)) for i, p in rights)
                    or g["users_status"] != "0"):
                self.changed(f"updated user group {name} rights")
                self.call("usergroup.update", {"usrgrpid": g["usrgrpid"], rk: want, "users_status": 0})
            out[name] = g["usrgrpid"]
        return out

    def users(self, specs):
        """specs: {username: (roleid, usrgrpid, surname)} -> {username: userid}"""
        r = self.call("user.get", {"filter": {"username": list(specs)}, "output": ["userid", "username", "roleid"],
                                   "selectUsrgrps": ["usrgrpid"]})
        have = {u["username"]: u for u in r}
        out = {}
        for username, (roleid, usrgrpid, surname) in specs.items():
            u = have.get(username)
            if not u:
                self.changed(f"created user {username}")
                out[username] = self.call("user.create", {
                    "username": username, "passwd": PASSWORD, "roleid": roleid,
                    "name": "Lab", "surname": surname,  # 7.0/6.0: passwd must not contain name/surname/username
                    "usrgrps": [{"usrgrpid": usrgrpid}]})["userids"][0]
                continue
            if u["roleid"] != roleid or ids(u["usrgrps"], "usrgrpid") != [usrgrpid]:
                self.changed(f"updated user {username}")
                self.call("user.update", {"userid": u["userid"], "roleid": roleid,
                                          "usrgrps": [{"usrgrpid": usrgrpid}]})
            out[username] = u["userid"]
        return out

    def user_token(self, userid, username, tokfile):
        if os.path.exists(tokfile):
            tok = open(tokfile).read().strip()
            try:
                me = self.api.with_token(tok).call("user.get", {"output": ["userid"], "filter": {"username": username}})
                if [u["userid"] for u in me] == [userid]:
                    return tok
            except ApiError:
                pass
        old = self.call("token.get", {"filter": {"name": TOKEN_NAME, "userid": userid}, "output": ["tokenid"]})
        if old:
            self.call("token.delete", [t["tokenid"] for t in old])
        t = self.call("token.create", {"name": TOKEN_NAME, "userid": userid, "description": DESC})["tokenids"]
        tok = self.call("token.generate", t)[0]["token"]
        self.changed(f"created API token '{TOKEN_NAME}' for {username}")
        with open(tokfile + ".tmp", "w") as f:
            f.write(tok + "\n")
        os.chmod(tokfile + ".tmp", 0o600)
        os.replace(tokfile + ".tmp", tokfile)
        return tok

    def disable_default_host(self):
        r = self.call("host.get", {"filter": {"host": ["Zabbix server"]}, "output": ["hostid", "status"]})
        if r and r[0]["status"] == "0":
            self.changed("disabled host 'Zabbix server'")
            self.call("host.update", {"hostid": r[0]["hostid"], "status": 1})

    # ---------------------------------------------------------------- history + live problems
    def push(self, data, what, timeout=40):
        """Push one batch; retry while the server's config cache does not know the item(s) yet."""
        t0 = time.time()
        while True:
            reply = send_values(data, TRAPPER_HOST, TRAPPER_PORT)
            done, failed, total = sender_counts(reply)
            if done == len(data):
                return
            if done:  # partial: should not happen for single-item batches
                raise RuntimeError(f"{what}: partial trapper result {reply}")
            if time.time() - t0 > timeout:
                raise RuntimeError(f"{what}: trapper never accepted the values: {reply}")
            time.sleep(0.5)

    def open_problems(self, triggerids):
        r = self.call("problem.get", {"objectids": list(triggerids.values()), "output": ["eventid", "objectid"],
                                      "sortfield": ["eventid"], "sortorder": "DESC"})
        by_tid = {}
        for p in r:
            by_tid.setdefault(p["objectid"], p["eventid"])
        return {d: by_tid[t] for d, t in triggerids.items() if t in by_tid}

    def history(self, items, prev):
        refresh = int(os.environ.get("ZBX_SEED_HISTORY_REFRESH", "1800"))
        now = int(time.time())
        last = self.call("item.get", {"itemids": list(items.values()), "output": ["itemid", "lastclock"]})
        lastclock = max([int(i["lastclock"] or 0) for i in last] + [0])
        prev_till = min(int(prev[k].get("till", 0)) for k in HISTORY_KEYS) if all(k in prev for k in HISTORY_KEYS) else 0
        # due when the series is stale, unknown (no manifest) or an item has no data (new item)
        due = prev_till < now - refresh or any(int(i["lastclock"] or 0) == 0 for i in last)
        start = max(now - 7200, lastclock + 1)
        end = now - 30
        if not due or end - start < 60:
            log(f"history: keeping the series pushed at {prev_till} (refresh every {refresh}s)")
            return prev
        clocks = [start + round(i * (end - start) / 9) for i in range(10)]
        out = {}
        for key in HISTORY_KEYS:
            vals = series_values(key)
            self.push([{"host": WEB1, "key": key, "value": v, "clock": c} for c, v in zip(clocks, vals)],
                      f"history {key}")
            out[key] = {"host": WEB1, "itemid": items[key], "from": clocks[0], "till": clocks[-1],
                        "values": [[c, v] for c, v in zip(clocks, vals)]}
        log(f"history: pushed 10 values x {len(HISTORY_KEYS)} items, clocks {clocks[0]}..{clocks[-1]}")
        return out

    def fire(self, desc):
        """low then high value with fresh clocks: resolves a half-closed state, then opens a problem."""
        key, low, high = FIRE[desc]
        itemid = self.items_web1[key]
        lc = int(self.call("item.get", {"itemids": [itemid], "output": ["lastclock"]})[0]["lastclock"] or 0)
        c = max(int(time.time()), lc + 1)
        self.push([{"host": WEB1, "key": key, "value": low, "clock": c}], f"fire {desc} (low)")
        self.push([{"host": WEB1, "key": key, "value": high, "clock": c + 1}], f"fire {desc} (high)")
        log(f"pushed {key} {low} -> {high} to open '{desc}'")

    def problems(self, triggerids, pushed_series):
        if not pushed_series:
            got = self.open_problems(triggerids)
            for d in triggerids:
                if d not in got:
                    self.fire(d)
        t0, refired = time.time(), False
        while True:
            got = self.open_problems(triggerids)
            if len(got) == len(triggerids):
                return got
            el = time.time() - t0
            if el > 12 and not refired:  # e.g. trigger reached the config cache after the series
                for d in triggerids:
                    if d not in got:
                        self.fire(d)
                refired = True
            if el > 40:
                raise RuntimeError(f"problems not open after {el:.0f}s: have {got}")
            time.sleep(0.5)


def purge(s, state):
    """Delete all seeded objects (dependants first). {$SNMP_COMMUNITY} is left alone (stock macro)."""
    def drop(kind, idkey, objs):
        if objs:
            s.call(f"{kind}.delete", [o[idkey] for o in objs])
            log(f"deleted {len(objs)} {kind}")
    drop("maintenance", "maintenanceid", s.call("maintenance.get", {"filter": {"name": [MAINT]}, "output": ["maintenanceid"]}))
    drop("host", "hostid", s.call("host.get", {"filter": {"host": [h[0] for h in HOSTS]}, "output": ["hostid"]}))
    drop("template", "templateid", s.call("template.get", {"filter": {"host": [t[0] for t in TEMPLATES]},
                                                           "output": ["templateid"]}))
    drop("user", "userid", s.call("user.get", {"filter": {"username": [u[0] for u in USERS]}, "output": ["userid"]}))
    drop("usergroup", "usrgrpid", s.call("usergroup.get", {"filter": {"name": [u[2] for u in USERS]},
                                                           "output": ["usrgrpid"]}))
    drop("hostgroup", "groupid", s.call("hostgroup.get", {"filter": {"name": [HG_LINUX, HG_DB, HG_NET, TG_BASE, TG_APPS]},
                                                          "output": ["groupid"]}))
    if s.v7:
        drop("templategroup", "groupid", s.call("templategroup.get", {"filter": {"name": [TG_BASE, TG_APPS]},
                                                                      "output": ["groupid"]}))
    g = s.call("usermacro.get", {"globalmacro": True, "filter": {"macro": ["{$MCP_GLOBAL}"]}, "output": ["globalmacroid"]})
    if g:
        s.call("usermacro.deleteglobal", [m["globalmacroid"] for m in g])
        log("deleted global macro {$MCP_GLOBAL}")
    for f in [f"seed{MAJOR}.json"] + [f"zabbix{MAJOR}-{u[0]}.token" for u in USERS]:
        if os.path.exists(os.path.join(state, f)):
            os.remove(os.path.join(state, f))


def main():
    global MAJOR, TRAPPER_HOST, TRAPPER_PORT
    args = sys.argv[1:]
    do_purge = "--purge" in args
    args = [a for a in args if a != "--purge"]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    envfile = os.path.abspath(args[0])
    env = load_env(envfile)
    api = Api(env["ZBX_URL"], env["ZBX_TOKEN"])
    MAJOR = api.major[0]
    TRAPPER_HOST, TRAPPER_PORT = env.get("ZBX_TRAPPER_HOST", "127.0.0.1"), int(env.get("ZBX_TRAPPER_PORT", "10051"))
    state = os.environ.get("ZBX_STATE_DIR") or os.path.dirname(envfile)
    manifest_path = os.path.join(state, f"seed{MAJOR}.json")
    try:
        prev = json.load(open(manifest_path))
    except (OSError, ValueError):
        prev = {}
    t0 = time.time()
    s = Seeder(api)
    if do_purge:
        return purge(s, state)
    M = {"zabbix_version": api.version, "url": env["ZBX_URL"], "trapper_port": TRAPPER_PORT,
         "template_groups_are_host_groups": not s.v7}

    if os.environ.get("ZBX_DISABLE_DEFAULT_HOST", "1") == "1":
        s.disable_default_host()
    M["host_groups"] = s.groups([HG_LINUX, HG_DB, HG_NET])
    M["template_groups"] = s.groups([TG_BASE, TG_APPS], "templategroup" if s.v7 else "hostgroup")  # 6.2+
    M["global_macros"] = s.global_macros()

    M["templates"] = s.templates({name: M["template_groups"][grp] for name, grp, _, _ in TEMPLATES})
    have_hosts = s.prefetch_hosts([h[0] for h in HOSTS])
    M["hosts"], M["host_names"] = {}, {}
    for host, name, grp, tags, iface, tpls, _, _ in HOSTS:
        M["hosts"][host] = s.host(have_hosts.get(host), host, name, M["host_groups"][grp], tags, iface,
                                  [M["templates"][t] for t in tpls])
        M["host_names"][host] = name

    owners = [(t[0], M["templates"][t[0]], t[2], t[3]) for t in TEMPLATES] + \
             [(h[0], M["hosts"][h[0]], h[6], h[7]) for h in HOSTS]
    allids = [o[1] for o in owners]
    s.prefetch_items(allids)
    for owner, oid, items, _ in owners:
        for k, n, vt in items:
            s.item(oid, k, n, vt, owner)
    s.prefetch_triggers(allids)
    for owner, oid, _, triggers in owners:
        for d, e, p, mc in triggers:
            s.trigger(oid, d, e, p, mc, owner)
    # final state for the manifest (also covers inherited template items/triggers on hosts)
    name_of = {oid: owner for owner, oid, _, _ in owners}
    M["items"], M["triggers"], M["inherited_triggers"] = {}, {}, {}
    for it in s.prefetch_items(allids):
        M["items"].setdefault(name_of[it["hostid"]], {})[it["key_"]] = it["itemid"]
    if s.changes:
        s.prefetch_triggers(allids)
    for (hid, desc), t in s.triggers_cache.items():
        if t["templateid"] == "0":
            M["triggers"][desc] = t["triggerid"]
        else:
            M["inherited_triggers"].setdefault(name_of[hid], {})[desc] = t["triggerid"]

    web1 = M["hosts"][WEB1]
    ruleid, protos = s.lld(web1)
    M["lld_rules"] = {"mcp.discovery": ruleid}
    M["item_prototypes"] = protos
    M["host_macros"] = s.host_macros(M["hosts"])
    M["maintenances"] = {MAINT: s.maintenance(M["hosts"]["mcp-db-02"])}

    M["user_groups"] = s.usergroups({ug: [(M["host_groups"][g], p) for g, p in rights]
                                     for _, _, ug, rights, _, _ in USERS})
    M["users"] = s.users({u: (role, M["user_groups"][ug], sn) for u, role, ug, _, sn, _ in USERS})
    tokens = {var: s.user_token(M["users"][u], u, os.path.join(state, f"zabbix{MAJOR}-{u}.token"))
              for u, _, _, _, _, var in USERS}
    M["user_password"] = PASSWORD

    # ---- history + live problems (need zabbix_server's trapper)
    trig = {d: M["triggers"][d] for d in FIRE}
    prev_hist = prev.get("history") or {}
    M["history"], M["problems"] = prev_hist, {}
    if port_open(TRAPPER_HOST, TRAPPER_PORT):
        # let zabbix_server's config cache (CacheUpdateFrequency=2) pick up the changes first: until then a
        # just-deleted item with the same host/key (e.g. after --purge) may still accept the values
        time.sleep(max(0.0, s.last_change + 5 - time.time()))
        s.items_web1 = M["items"][WEB1]
        hist_items = {k: M["items"][WEB1][k] for k in HISTORY_KEYS}
        M["history"] = s.history(hist_items, prev_hist)
        pushed = M["history"] is not prev_hist
        M["problems"] = s.problems(trig, pushed)
    else:
        log(f"WARNING: trapper {TRAPPER_HOST}:{TRAPPER_PORT} not reachable: no history, no live problems")
    M["seeded_at"] = int(time.time())

    tmp = manifest_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(M, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, manifest_path)
    update_env(envfile, {**tokens, "ZBX_SEED_MANIFEST": manifest_path})
    log(f"done in {time.time() - t0:.1f}s: {len(s.changes)} config change(s); problems {M['problems']}; "
        f"manifest {manifest_path}")


MAJOR, TRAPPER_HOST, TRAPPER_PORT = "?", "127.0.0.1", 10051
if __name__ == "__main__":
    main()
