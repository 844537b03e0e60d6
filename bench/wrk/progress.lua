-- wrk script: Spark-shaped progress events for POST /v1/progress.
--
-- QUERIES queries (one consumer group each) of PARTITIONS partitions on TOPIC, spread
-- over wrk's threads (each thread owns its own queries, so one query's batches are sent
-- in order by one thread); every request is the next batch of the thread's next query.
-- RATE > 0 sends RATE requests/s in all (each thread its share, on a fixed schedule: a
-- connection waits for its request's slot; a late answer does not push the schedule
-- back while connections are free). Environment: TOPIC, QUERIES, PARTITIONS, RATE, RUN,
-- THREADS (wrk's -t), QUERY_BASE (the first query's number, 0 unless several wrk
-- processes share a run: each then sends its own queries).
-- Prints one JSON line at the end: counts by outcome and the latency percentiles.

local topic = os.getenv("TOPIC") or "bench"
local queries = tonumber(os.getenv("QUERIES") or "500")
local partitions = tonumber(os.getenv("PARTITIONS") or "8")
local rate = tonumber(os.getenv("RATE") or "0")
local run = os.getenv("RUN") or "r1"

local threads = {}
local counter = 0

function setup(thread)
  thread:set("index", counter)
  counter = counter + 1
  table.insert(threads, thread)
end

local first, last, next_query, batches
accepted, other, failed = 0, 0, 0  -- globals: done() reads them with thread:get

function init(args)
  local per = math.floor(queries / tonumber(os.getenv("THREADS") or "2"))
  first = tonumber(os.getenv("QUERY_BASE") or "0") + index * per
  last = first + per - 1
  next_query = first
  batches = {}
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
end

local function body(q, batch)
  local parts = {}
  for p = 0, partitions - 1 do
    parts[#parts + 1] = string.format('"%d":%d', p, batch * 100 + p)
  end
  local offsets = string.format('{"%s":{%s}}', topic, table.concat(parts, ","))
  return string.format(
    '{"group_id":"bench-%s-%d","progress":{"id":"q-%s-%d","runId":"run-%s",' ..
    '"name":"bench","timestamp":"2026-11-23T12:00:00.000Z","batchId":%d,' ..
    '"numInputRows":10,"sources":[{"description":"KafkaV2[Subscribe[%s]]",' ..
    '"startOffset":null,"endOffset":%s,"latestOffset":%s,"numInputRows":10}],' ..
    '"sink":{"description":"ForeachBatchSink","numOutputRows":-1}}}',
    run, q, run, q, run, batch, topic, offsets, offsets)
end

function request()
  local q = next_query
  next_query = (q == last) and first or q + 1
  local batch = (batches[q] or -1) + 1
  batches[q] = batch
  return wrk.format(nil, "/v1/progress", nil, body(q, batch))
end

local ffi = require("ffi")
ffi.cdef[[
  typedef struct { long tv_sec; long tv_nsec; } timespec;
  int clock_gettime(int clk_id, timespec *tp);
]]
local now_ts = ffi.new("timespec")

local function now_ms()
  ffi.C.clock_gettime(1, now_ts)  -- CLOCK_MONOTONIC
  return tonumber(now_ts.tv_sec) * 1000 + tonumber(now_ts.tv_nsec) / 1e6
end

local next_slot = nil

if rate > 0 then
  function delay()
    local step = 1000 / (rate / tonumber(os.getenv("THREADS") or "2"))
    local now = now_ms()
    if next_slot == nil then
      next_slot = now
    end
    local wait = next_slot - now
    next_slot = next_slot + step
    return wait > 0 and wait or 0
  end
end

function response(status, headers, body)
  if status >= 300 then
    failed = failed + 1
    if failed == 1 then
      io.stderr:write(string.format("first refusal: %d %s\n", status, string.sub(body, 1, 300)))
    end
  elseif string.find(body, '"accepted"', 1, true) then
    accepted = accepted + 1
  else
    other = other + 1
  end
end

function done(summary, latency, requests)
  local a, o, f = 0, 0, 0
  for _, thread in ipairs(threads) do
    a = a + thread:get("accepted")
    o = o + thread:get("other")
    f = f + thread:get("failed")
  end
  io.write(string.format(
    '{"requests":%d,"seconds":%.3f,"accepted":%d,"other":%d,"non2xx":%d,' ..
    '"socket_errors":%d,"p50_ms":%.3f,"p99_ms":%.3f,"max_ms":%.3f}\n',
    summary.requests, summary.duration / 1e6, a, o, f,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000))
end
