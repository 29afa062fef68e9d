#!/usr/bin/python3
"""Checks deploy/kubernetes/: the sidecar pattern, as written in the manifests.

Run: /usr/bin/python3 tests/deploy/check_kubernetes.py  (python3-yaml from Debian).
Prints what it checked; exits non-zero naming the first thing that does not hold.
"""
import os
import re
import sys
from urllib.parse import urlparse

import yaml

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
K8S = os.path.join(ROOT, "deploy", "kubernetes")
DOCKERFILE = os.path.join(ROOT, "deploy", "container", "Dockerfile")


def fail(message):
    sys.exit(f"FAIL: {message}")


def check(cond, message):
    if not cond:
        fail(message)
    print(f"ok: {message}")


def load(name):
    with open(os.path.join(K8S, name)) as f:
        return [d for d in yaml.safe_load_all(f) if d]


kustomization = load("kustomization.yaml")[0]
docs = []
for name in kustomization["resources"]:
    docs += load(name)
kinds = {d["kind"]: d for d in docs}
check(set(kinds) == {"Deployment", "Service", "NetworkPolicy", "PodDisruptionBudget"},
      f"resources are the Deployment, Service, NetworkPolicy and PDB ({sorted(kinds)})")

deployment = kinds["Deployment"]
pod = deployment["spec"]["template"]
labels = pod["metadata"]["labels"]
check(deployment["spec"]["selector"]["matchLabels"].items() <= labels.items(),
      "the Deployment selects its own pods")
containers = {c["name"]: c for c in pod["spec"]["containers"]}
check(set(containers) == {"zabbix-web", "zabbix-mcp-guard"},
      "the pod holds the Zabbix web frontend and the sidecar")
web, guard = containers["zabbix-web"], containers["zabbix-mcp-guard"]
check(web["image"].startswith("docker.io/zabbix/zabbix-web-"), "the frontend is the official image")
env = {e["name"]: e.get("value") for e in guard["env"]}
frontend = urlparse(env["ZBX_FRONTEND_URL"])
web_port = {p["name"]: p["containerPort"] for p in web["ports"]}["web"]
check(frontend.hostname in ("127.0.0.1", "localhost", "::1") and frontend.port == web_port,
      f"the sidecar reaches the frontend on the pod's loopback ({env['ZBX_FRONTEND_URL']})")
mcp_port = {p["name"]: p["containerPort"] for p in guard["ports"]}["mcp"]
check(str(mcp_port) == env["ZBX_LISTENPORT"], "the MCP port is the one the sidecar listens on")
# The kubelet probes from the node's address; AllowedIP (the agents' network) need not
# hold it, and the MCP listener closes such a connection at accept. The status listener
# (StatusListenPort) has no AllowedIP.
guard_ports = {p["name"]: p["containerPort"] for p in guard["ports"]}
status_port = env.get("ZABBIX_MCP_GUARD_STATUS_LISTEN_PORT")
check(guard["readinessProbe"]["httpGet"]["path"] == "/readyz", "readiness on /readyz")
check(guard["livenessProbe"]["httpGet"]["path"] == "/healthz", "liveness on /healthz")
for probe in ("readinessProbe", "livenessProbe"):
    port = guard[probe]["httpGet"]["port"]
    check(status_port is not None and str(guard_ports.get(port, port)) == status_port,
          f"{probe} goes to the status listener, not behind AllowedIP ({port})")
check(status_port not in (None, env["ZBX_LISTENPORT"], str(web_port)),
      "the status listener has a port of its own in the pod")
sc = guard["securityContext"]
check(sc["runAsNonRoot"] and sc["runAsUser"] != 0 and sc["readOnlyRootFilesystem"]
      and sc["allowPrivilegeEscalation"] is False and sc["capabilities"]["drop"] == ["ALL"],
      "the sidecar runs non-root, read-only, without privileges")

# Policies: a ConfigMap mounted whole where the sidecar reads them.
mounts = {m["name"]: m for m in guard["volumeMounts"]}
volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
policy_mount = mounts["policies"]
check("subPath" not in policy_mount, "the policy mount has no subPath (updates reach it)")
check(policy_mount["mountPath"] == env["ZABBIX_MCP_GUARD_POLICY_DIR"],
      "PolicyDir is the ConfigMap mount")
with open(DOCKERFILE) as f:
    image_env = re.search(r"ZABBIX_MCP_GUARD_POLICY_DIR=(\S+)", f.read()).group(1)
check(image_env == policy_mount["mountPath"], "the image's own PolicyDir is the same path")
cm_name = volumes["policies"]["configMap"]["name"]
generated = {g["name"]: g for g in kustomization["configMapGenerator"]}
check(cm_name in generated, f"the ConfigMap {cm_name} is generated from policy files")
check(kustomization["generatorOptions"]["disableNameSuffixHash"] is True,
      "the ConfigMap keeps its name, so an update is a file swap, not a new rollout")
for rel in generated[cm_name]["files"]:
    with open(os.path.join(K8S, rel)) as a, open(os.path.join(ROOT, "policies", os.path.basename(rel))) as b:
        check(a.read() == b.read(), f"{rel} is the shipped policies/{os.path.basename(rel)}")
# Secrets come from Secret files the sidecar's group alone reads: the seal key, and the
# Redis URL (it holds a password; as a variable it would be in the process environment).
# The kubelet lays a Secret's files out owned by root; with the pod's fsGroup their group
# is that group and group read is added to defaultMode (kubernetes/kubernetes#57923).
# The sidecar runs as runAsUser:runAsGroup with fsGroup among its groups.
pod_sc = pod["spec"].get("securityContext", {})
fs_group = pod_sc.get("fsGroup")
guard_groups = {sc.get("runAsGroup", pod_sc.get("runAsGroup", 0))} | (
    {fs_group} if fs_group is not None else set())
for variable, volume, what in [
    ("ZABBIX_MCP_GUARD_APPROVAL_SEAL_KEY_FILE", "seal-key", "the seal key"),
    ("ZABBIX_MCP_GUARD_SHARED_STORE_FILE", "redis-url", "the Redis URL"),
]:
    if variable not in env:
        continue
    check(volume in mounts and env[variable].startswith(mounts[volume]["mountPath"] + "/")
          and "secret" in volumes[volume], f"{what} comes from a Secret file")
    mode = volumes[volume]["secret"].get("defaultMode", 0o644)
    if fs_group is not None:
        mode |= 0o440
    group = fs_group if fs_group is not None else 0
    check(mode & 0o004 or (group in guard_groups and mode & 0o040),
          f"the sidecar (uid {sc['runAsUser']}) can read {what} as the kubelet writes it "
          f"(root:{group}, {mode:04o})")
    check(not mode & 0o004 and group in guard_groups,
          f"no one but the sidecar's own group reads {what}")
check("ZABBIX_MCP_GUARD_APPROVAL_SEAL_KEY_FILE" in env, "the seal key is given as a file")

# Only the MCP port is exposed.
service = kinds["Service"]
check(service["spec"]["selector"] == labels, "the Service selects the pod")
check([p["targetPort"] for p in service["spec"]["ports"]] == ["mcp"],
      "the Service exposes the MCP port only")

# Agents reach the sidecar only.
netpol = kinds["NetworkPolicy"]
check(netpol["spec"]["podSelector"]["matchLabels"] == labels, "the NetworkPolicy covers the pod")
check(netpol["spec"]["policyTypes"] == ["Ingress"], "ingress not listed is denied")
agent_rules = [r for r in netpol["spec"]["ingress"]
               if any(p.get("podSelector", {}).get("matchLabels", {}).get("zabbix-mcp-agent") == "true"
                      for p in r["from"])]
check(len(agent_rules) == 1 and [p["port"] for p in agent_rules[0]["ports"]] == [mcp_port],
      "agents may reach the MCP port and nothing else")
for rule in netpol["spec"]["ingress"]:
    check("ports" in rule and rule["from"], "every ingress rule names its peers and ports")
    if web_port in [p["port"] for p in rule["ports"]]:
        check(all("podSelector" not in p for p in rule["from"]),
              "the web port is open to the ingress controller's namespace only")

# Replicas share state: approvals, single-use sealed states, limits (README "Replicas").
check(deployment["spec"]["replicas"] == 1
      or "ZABBIX_MCP_GUARD_SHARED_STORE_FILE" in env,
      "more than one replica shares a Redis (SharedStoreFile from a Secret)")
check(not any(e["name"] == "ZABBIX_MCP_GUARD_SHARED_STORE" for e in guard["env"]),
      "the Redis URL is no variable: its password would be in the process environment")

pdb = kinds["PodDisruptionBudget"]
check(pdb["spec"]["selector"]["matchLabels"] == labels, "the PDB covers the pod")
check(pdb["spec"]["minAvailable"] >= 1 and deployment["spec"]["replicas"] > pdb["spec"]["minAvailable"],
      "the PDB keeps one pod while a node drains")
print("kubernetes manifests: OK")
