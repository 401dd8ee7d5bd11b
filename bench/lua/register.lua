-- wrk script: distinct registrations. Every request registers an instance that no
-- earlier request named: thread t (1-based) registers 127.<t>.<hi>.<lo>:<port>,
-- counting up, spread round-robin over <services> services named <prefix>-<i>. The
-- addresses are loopback ones: persistent instances are probed by TCP, and the bench
-- sends nothing beyond this machine.
--
-- Arguments (after wrk's `--`): prefix services ephemeral [shape]
--   wrk -t2 -c50 -d10s -s register.lua http://127.0.0.1:8848 -- reg 1000 true
--   wrk -t2 -c50 -d10s -s register.lua http://127.0.0.1:8848 -- eph 1000 true dubbo
--
-- shape `none` (the default) sends no metadata. Shape `dubbo` adds
-- `&metadata=<percent-encoded JSON>` with the nine keys of a Dubbo 3 application-level
-- provider exactly as `Shape::Dubbo` in bench/src/shapes.rs builds them (same keys,
-- values and key order as serde_json prints them): `dubbo.metadata.revision` is the md5
-- of the service name, `application` the service name, and `timestamp`
-- 1764633600000 + n*37 + t for the thread's n-th request, different for every request.
-- The per-service text around the timestamp is built and percent-encoded once, in
-- init, so a request costs one concatenation more than with `none`.

local threads = 0

function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end

local prefix, services, ephemeral, shape
local n = 0
-- Shape `dubbo`: per service, the encoded metadata up to the timestamp's digits.
local dubbo_head = {}
local dubbo_tail

-- MD5 (RFC 1321) with LuaJIT's bit library: Dubbo's metadata revision is 32 hex digits.
local bit = require("bit")
local band, bor, bxor, bnot = bit.band, bit.bor, bit.bxor, bit.bnot
local rol, rshift, tobit = bit.rol, bit.rshift, bit.tobit

local MD5_K = {
  0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee,
  0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
  0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be,
  0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
  0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa,
  0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
  0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed,
  0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
  0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c,
  0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
  0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05,
  0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
  0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039,
  0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
  0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1,
  0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
}
local MD5_S = {
  7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
  5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20,
  4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
  6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
}

local function md5_hex(text)
  local len = #text
  local bits = len * 8
  text = text .. "\128" .. string.rep("\0", (55 - len) % 64)
  for i = 0, 7 do
    text = text .. string.char(math.floor(bits / 2 ^ (8 * i)) % 256)
  end
  local h = { tobit(0x67452301), tobit(0xefcdab89), tobit(0x98badcfe), tobit(0x10325476) }
  local m = {}
  for chunk = 1, #text, 64 do
    for j = 0, 15 do
      local b0, b1, b2, b3 = text:byte(chunk + 4 * j, chunk + 4 * j + 3)
      m[j] = tobit(b0 + b1 * 0x100 + b2 * 0x10000 + b3 * 0x1000000)
    end
    local a, b, c, d = h[1], h[2], h[3], h[4]
    for i = 0, 63 do
      local f, g
      if i < 16 then
        f, g = bor(band(b, c), band(bnot(b), d)), i
      elseif i < 32 then
        f, g = bor(band(d, b), band(bnot(d), c)), (5 * i + 1) % 16
      elseif i < 48 then
        f, g = bxor(b, c, d), (3 * i + 5) % 16
      else
        f, g = bxor(c, bor(b, bnot(d))), (7 * i) % 16
      end
      a, b, c, d = d, tobit(b + rol(tobit(a + f + MD5_K[i + 1] + m[g]), MD5_S[i + 1])), b, c
    end
    h[1], h[2], h[3], h[4] = tobit(h[1] + a), tobit(h[2] + b), tobit(h[3] + c), tobit(h[4] + d)
  end
  local out = {}
  for _, word in ipairs(h) do
    for k = 0, 3 do
      out[#out + 1] = string.format("%02x", band(rshift(word, 8 * k), 0xff))
    end
  end
  return table.concat(out)
end

-- Percent-encodes everything but unreserved characters (as the driver's `encode`).
local function encode(text)
  return (text:gsub("[^%w%-%._~]", function(c)
    return string.format("%%%02X", c:byte())
  end))
end

function init(args)
  prefix = args[1] or "reg"
  services = tonumber(args[2] or "1000")
  ephemeral = args[3] or "true"
  shape = args[4] or "none"
  if shape == "dubbo" then
    -- Keys in serde_json's (sorted) order; string values JSON-escaped.
    for i = 0, services - 1 do
      local service = string.format("%s-%d", prefix, i)
      dubbo_head[i] = "&metadata=" .. encode(
        '{"application":"' .. service .. '",'
        .. '"dubbo.endpoints":"[{\\"port\\":20880,\\"protocol\\":\\"dubbo\\"}]",'
        .. '"dubbo.metadata-service.url-params":"{\\"connections\\":\\"1\\",'
        .. '\\"version\\":\\"1.0.0\\",\\"dubbo\\":\\"2.0.2\\",\\"release\\":\\"3.2.10\\",'
        .. '\\"side\\":\\"provider\\",\\"port\\":\\"20880\\",\\"protocol\\":\\"dubbo\\"}",'
        .. '"dubbo.metadata.revision":"' .. md5_hex(service) .. '",'
        .. '"dubbo.metadata.storage-type":"local",'
        .. '"release":"3.2.10","side":"provider","timestamp":"')
    end
    dubbo_tail = encode('","version":"1.0.0"}')
  elseif shape ~= "none" then
    error("register.lua: unknown shape " .. shape .. " (none or dubbo)")
  end
end

function request()
  local ip = string.format("127.%d.%d.%d", tid, math.floor(n / 256) % 256, n % 256)
  local port = 10000 + math.floor(n / 65536)
  local path = string.format(
    "/nacos/v1/ns/instance?serviceName=%s-%d&ip=%s&port=%d&ephemeral=%s",
    prefix, n % services, ip, port, ephemeral)
  if shape == "dubbo" then
    path = path .. dubbo_head[n % services]
      .. string.format("%.0f", 1764633600000 + n * 37 + tid) .. dubbo_tail
  end
  n = n + 1
  return wrk.format("POST", path, nil, "")
end
