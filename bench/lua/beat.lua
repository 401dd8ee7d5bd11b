-- wrk script: heartbeats cycling over instances the driver registered beforehand,
-- as a Nacos 1.x client sends them: PUT /nacos/v1/ns/instance/beat with the grouped
-- service name and the urlencoded beat JSON. Instance k lives in service
-- <prefix>-<k / per_service> at 10.<1 + k/65536>.<k/256 % 256>.<k % 256>:8080
-- (the layout of `Layout` in bench/src/api.rs; change both together).
-- Each thread starts at its own offset, so the threads beat different instances.
--
-- Arguments (after wrk's `--`): prefix count per_service threads
--   wrk -t2 -c50 -d10s -s beat.lua http://127.0.0.1:8848 -- beat 10000 100 2

local threads = 0

function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end

local function urlencode(s)
  return (s:gsub("[^%w%-%._~]", function(c)
    return string.format("%%%02X", string.byte(c))
  end))
end

local requests = {}
local next_index = 1

function init(args)
  local prefix = args[1] or "beat"
  local count = tonumber(args[2] or "10000")
  local per_service = tonumber(args[3] or "100")
  local nthreads = tonumber(args[4] or "2")
  local offset = math.floor((tid - 1) * count / nthreads)
  for i = 0, count - 1 do
    local k = (offset + i) % count
    local ip = string.format("127.%d.%d.%d", 1 + math.floor(k / 65536),
      math.floor(k / 256) % 256, k % 256)
    local service = string.format("DEFAULT_GROUP@@%s-%d", prefix, math.floor(k / per_service))
    local beat = string.format(
      '{"ip":"%s","port":8080,"serviceName":"%s","cluster":"DEFAULT","weight":1.0,"metadata":{}}',
      ip, service)
    local path = "/nacos/v1/ns/instance/beat?serviceName=" .. urlencode(service)
      .. "&beat=" .. urlencode(beat)
    requests[i + 1] = wrk.format("PUT", path, nil, "")
  end
end

function request()
  local r = requests[next_index]
  next_index = next_index % #requests + 1
  return r
end
