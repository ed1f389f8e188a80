-- wrk script for bench/run.ts: replays pre-signed deliveries, one per request.
-- Usage: wrk ... -s deliveries.lua <url> -- <pool dir> <wrap: 0|1>
-- <pool dir>/templates.lua returns { path=, host=, types={ {p1,p2,p3}, ... } }
-- <pool dir>/shard-<n>.tsv holds one delivery per line for thread n:
--   msg_id \t timestamp \t signature \t event_id \t application_id \t type (1-based)
-- Each thread sends each of its deliveries at most once (wrap=0), so every
-- event id is unique; if the pool runs out it counts `exhausted` and resends
-- the last one, and run.ts marks the run invalid.
--
-- wrk calls request() once in the first thread's state before any thread runs,
-- to check the request it builds (script_verify_request in wrk.c, every
-- version): that request is never sent. It is built here without taking a
-- delivery or counting it as issued, or the first delivery would never be
-- sent and `issued` would count one request more than wrk ever wrote (one
-- more "in flight at stop" than there was, loosening run.ts's rows check).

local threads = {}
local nthreads = 0

function setup(thread)
  nthreads = nthreads + 1
  thread:set("shard", nthreads)
  table.insert(threads, thread)
end

function init(args)
  local dir = args[1]
  wrap = args[2] == "1"
  local t = dofile(dir .. "/templates.lua")
  path, host, types = t.path, t.host, t.types
  msg, ts, sig, evt, app, typ = {}, {}, {}, {}, {}, {}
  n = 0
  for line in io.lines(dir .. "/shard-" .. shard .. ".tsv") do
    local a, b, c, d, e, f = line:match("^([^\t]+)\t([^\t]+)\t([^\t]+)\t([^\t]+)\t([^\t]+)\t(%d+)$")
    if a then
      n = n + 1
      msg[n], ts[n], sig[n], evt[n], app[n], typ[n] = a, b, c, d, e, tonumber(f)
    end
  end
  idx, issued, exhausted = 0, 0, 0
  verifying = shard == 1
  s2xx, s4xx, s5xx, sother, accepted = 0, 0, 0, 0, 0
end

local function build(i)
  local p = types[typ[i]]
  local body = p[1] .. evt[i] .. p[2] .. app[i] .. p[3]
  return "POST " .. path .. " HTTP/1.1\r\nHost: " .. host ..
    "\r\nContent-Type: application/json\r\nContent-Length: " .. #body ..
    "\r\nwebhook-id: " .. msg[i] ..
    "\r\nwebhook-timestamp: " .. ts[i] ..
    "\r\nwebhook-signature: v1," .. sig[i] .. "\r\n\r\n" .. body
end

function request()
  if verifying then
    -- wrk's check of the request format (see the top of this file): not sent.
    verifying = false
    return build(1)
  end
  idx = idx + 1
  if idx > n then
    if wrap then idx = 1 else exhausted = exhausted + 1; idx = n end
  end
  issued = issued + 1
  return build(idx)
end

function response(status, headers, body)
  if status >= 200 and status < 300 then
    s2xx = s2xx + 1
    if body and string.find(body, '"accepted"', 1, true) then accepted = accepted + 1 end
  elseif status >= 400 and status < 500 then
    s4xx = s4xx + 1
  elseif status >= 500 then
    s5xx = s5xx + 1
  else
    sother = sother + 1
  end
end

function done(summary, latency, requests)
  local c = { issued = 0, exhausted = 0, s2xx = 0, s4xx = 0, s5xx = 0, sother = 0, accepted = 0, pool = 0 }
  for _, t in ipairs(threads) do
    c.issued = c.issued + t:get("issued")
    c.exhausted = c.exhausted + t:get("exhausted")
    c.s2xx = c.s2xx + t:get("s2xx")
    c.s4xx = c.s4xx + t:get("s4xx")
    c.s5xx = c.s5xx + t:get("s5xx")
    c.sother = c.sother + t:get("sother")
    c.accepted = c.accepted + t:get("accepted")
    c.pool = c.pool + t:get("n")
  end
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests":%d,"duration_us":%d,"bytes":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"latency_us":{"p50":%d,"p90":%d,"p99":%d,"p999":%d,"max":%d,"mean":%.1f},' ..
    '"issued":%d,"exhausted":%d,"s2xx":%d,"s4xx":%d,"s5xx":%d,"sother":%d,"accepted":%d,"pool":%d}\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9), latency.max, latency.mean,
    c.issued, c.exhausted, c.s2xx, c.s4xx, c.s5xx, c.sother, c.accepted, c.pool))
end
