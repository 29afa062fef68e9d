-- wrk script for scripts/perf/wrk.sh: posts BODY_FILE to the target with the headers of
-- KIND ("direct": a JSON-RPC POST straight to Zabbix; "mcp": a stateless MCP POST to the
-- sidecar), counts answers that are not successes, and prints one RESULT line.
local kind = os.getenv("KIND") or "mcp"
local token = os.getenv("TOKEN") or ""
local file = assert(io.open(os.getenv("BODY_FILE"), "rb"))
local body = file:read("*a")
file:close()

wrk.method = "POST"
wrk.body = body
wrk.headers["Authorization"] = "Bearer " .. token
if kind == "direct" then
  wrk.headers["Content-Type"] = "application/json-rpc"
  ok_marker, bad_marker = '"result"', '"error"'
else
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Accept"] = "application/json, text/event-stream"
  wrk.headers["MCP-Protocol-Version"] = "2025-11-25"
  ok_marker = os.getenv("OK_MARKER") or '"structuredContent"'
  bad_marker = '"isError":true'
end

-- PAUSE_MS: each connection waits that long after an answer before its next request, so
-- the sidecar idles between calls as it does beside a Zabbix that takes its time.
local pause = tonumber(os.getenv("PAUSE_MS") or "0")
if pause > 0 then
  function delay()
    return pause
  end
end

local threads = {}
function setup(thread)
  table.insert(threads, thread)
end

-- FAIL_FILE: the first answer that is not a success is written there (its status and up
-- to 400 bytes), so a run that counts failures can say what they were.
local fail_file = os.getenv("FAIL_FILE")
failed = 0
function response(status, headers, body)
  if status ~= 200 or not body:find(ok_marker, 1, true) or body:find(bad_marker, 1, true) then
    failed = failed + 1
    if failed == 1 and fail_file then
      local f = io.open(fail_file, "w")
      if f then
        f:write(status .. " " .. body:sub(1, 400) .. "\n")
        f:close()
      end
    end
  end
end

function done(summary, latency, requests)
  local bad = 0
  for _, thread in ipairs(threads) do
    bad = bad + (thread:get("failed") or 0)
  end
  io.write(string.format(
    "RESULT requests=%d seconds=%.3f rps=%.1f p50_us=%d p99_us=%d failed=%d socket_errors=%d\n",
    summary.requests, summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
    latency:percentile(50), latency:percentile(99), bad,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
