-- wrk script: one request per instance, cycling over instances the driver registered
-- beforehand (the faces group's Consul TTL passes and Eureka renewals). The path is a
-- template: `{k}` becomes the instance's number k (0 .. count-1), `{s}` its service's
-- (k / per_service, rounded down). Headers (the token, Basic auth) come from wrk's -H,
-- which every request carries. Each thread starts at its own offset, so the threads
-- send for different instances.
--
-- Arguments (after wrk's `--`): method template count per_service threads
--   wrk -t2 -c50 -d10s -s cycle.lua -H 'X-Consul-Token: T' http://127.0.0.1:8848 \
--     -- PUT '/v1/agent/check/pass/service:cbeat-{k}' 1000 100 2

local threads = 0

function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end

local requests = {}
local next_index = 1

function init(args)
  local method = args[1] or "PUT"
  local template = args[2] or error("cycle.lua: no path template")
  local count = tonumber(args[3] or "1000")
  local per_service = tonumber(args[4] or "100")
  local nthreads = tonumber(args[5] or "2")
  local offset = math.floor((tid - 1) * count / nthreads)
  for i = 0, count - 1 do
    local k = (offset + i) % count
    local path = template:gsub("{k}", tostring(k))
      :gsub("{s}", tostring(math.floor(k / per_service)))
    -- nil headers: wrk's own, with Host and every -H.
    requests[i + 1] = wrk.format(method, path, nil, "")
  end
end

function request()
  local r = requests[next_index]
  next_index = next_index % #requests + 1
  return r
end
