/*
 * SimGrid platform loader for calibrated collbench clusters (smpirun -platform THIS.so).
 *
 * SMPI's own smpi/lat-factor and smpi/bw-factor are one table for the whole platform, so
 * they cannot reproduce ping-pongs whose shape differs per placement level (shared memory
 * vs. InfiniBand switch protocols at different sizes). This loader reads the XML that
 * collbench generated (path in $COLLBENCH_PLATFORM_XML) and installs latency and bandwidth
 * factor callbacks that pick the table of the level a message crosses:
 *   root zone properties  collbench/cores_per_socket = C
 *                         collbench/lat-factor/<level>, collbench/bw-factor/<level>
 *                         = "from_bytes:factor;from_bytes:factor;..." (ascending)
 *                         collbench/overhead/<level> = "send_s:recv_s", or size-dependent
 *                         "from_bytes:send_s:recv_s;..." (optional; linear between entries)
 * Hosts are named node<N>-c<K> (core K of node N, socket K / C): same node and socket =
 * intra_socket, same node = inter_socket, else inter_node; with collbench/sockets_per_package
 * = P (set only when the platform has an inter_package level), two sockets of one node in
 * different packages (socket / P) = inter_package. SMPI adds a 16-byte envelope to
 * every message; the tables are written for the payload, as collbench measures it.
 * Overheads (LogGP o_s, o_r) become SMPI's per-operation cost callbacks: the sender of
 * MPI_Send/MPI_Isend and the receiver of MPI_Recv spend that much simulated time per
 * message, by the level the message crosses and the message's size (SMPI's smpi/os and
 * smpi/or options are one table for every pair of hosts).
 *                         collbench/load-latency/<level> = "busy_cores:seconds;..."
 *                         (optional; linear between entries, 0 below the first)
 * Load latency: a message gains that much latency when that many cores of its sender's
 * node run a rank (counted once, when the first message is costed: SMPI has started every
 * rank by then); added through the latency factor, as extra / (the route's latency).
 *                         collbench/load-slowdown/<level> = "busy_cores:factor;..."
 *                         (optional; linear between entries, none below the first)
 * Load slowdown: a transfer's bytes take `factor` times longer when that many cores of its
 * sender's node run a rank (a copy moves its cache lines at the loaded latency); applied
 * by dividing the bandwidth factor.
 *                         collbench/send-queue/<level> = "from_bytes:bytes_per_second"
 *                         (optional)
 * Send queue: a sender's transfers of from_bytes or more leave one after another through
 * its port at that rate (one queue for the node's card, one for the rest: a NIC's send
 * queue, a socket's one port): a transfer starts once the bytes of the sender's earlier
 * transfers through that port have left (size / rate each), added to its latency, so a
 * root's fan-out completes in order while a lone message costs what a ping-pong says; the
 * sender itself does not wait.
 */
#include <simgrid/kernel/resource/NetworkModelIntf.hpp>
#include <simgrid/s4u.hpp>
#include <smpi/smpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace sg4 = simgrid::s4u;

namespace {

constexpr double ENVELOPE = 16.0;
constexpr int NLEVELS = 4; // indices: 0 intra_socket, 1 inter_socket, 2 inter_node, 3 inter_package
const char* const LEVELS[NLEVELS] = {"intra_socket", "inter_socket", "inter_node", "inter_package"};

using Table = std::vector<std::pair<double, double>>; // (from payload bytes, factor)

struct Overhead {
  double from;   // payload bytes
  double send_s; // seconds
  double recv_s;
};
using Overheads = std::vector<Overhead>; // ascending; empty = none

struct Tables {
  int cores_per_socket    = 1;
  int sockets_per_package = 0; // 0: no inter_package level
  Table lat[NLEVELS];
  Table bw[NLEVELS];
  Overheads over[NLEVELS];
  Table load[NLEVELS];        // (busy cores, extra seconds); empty = none
  Table slow[NLEVELS];        // (busy cores, time factor of the bytes); empty = none
  double queue_from[NLEVELS] = {0, 0, 0, 0}; // send queue: from payload bytes
  double queue_bps[NLEVELS]  = {0, 0, 0, 0}; // ... at bytes per second; 0 = none
  std::unordered_map<const sg4::Host*, double> queue_free[2]; // per port (0 node, 1 card) and
                                                              // sender: when its queue is empty
  std::vector<int> busy;      // per node: cores running a rank (filled on first use)
};

/* the ';'-separated entries of a property (none when absent or empty) */
std::vector<std::string> entries(const char* text)
{
  std::vector<std::string> out;
  std::string s(text == nullptr ? "" : text);
  size_t pos = 0;
  while (pos < s.size()) {
    size_t end = s.find(';', pos);
    if (end == std::string::npos)
      end = s.size();
    out.push_back(s.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

/* "send_s:recv_s" (every size) or "from:send_s:recv_s;..." into a level's overheads */
Overheads parse_overheads(const char* text)
{
  Overheads out;
  for (auto const& item : entries(text)) {
    size_t c1        = item.find(':');
    size_t c2        = c1 == std::string::npos ? c1 : item.find(':', c1 + 1);
    if (c1 == std::string::npos)
      throw std::invalid_argument("collbench platform: malformed overhead '" + item + "'");
    if (c2 == std::string::npos) // the constant form
      out.push_back({0.0, std::stod(item.substr(0, c1)), std::stod(item.substr(c1 + 1))});
    else
      out.push_back({std::stod(item.substr(0, c1)), std::stod(item.substr(c1 + 1, c2 - c1 - 1)),
                     std::stod(item.substr(c2 + 1))});
  }
  return out;
}

/* (send, recv) seconds for a message of `size` payload bytes: linear between entries */
std::pair<double, double> overhead_at(const Overheads& o, double size)
{
  if (o.empty())
    return {0.0, 0.0};
  for (size_t i = 0; i + 1 < o.size(); i++) {
    if (size >= o[i].from && size < o[i + 1].from) {
      double w = (size - o[i].from) / (o[i + 1].from - o[i].from);
      return {o[i].send_s + w * (o[i + 1].send_s - o[i].send_s),
              o[i].recv_s + w * (o[i + 1].recv_s - o[i].recv_s)};
    }
  }
  return {o.back().send_s, o.back().recv_s};
}

Table parse_table(const char* text)
{
  Table out;
  if (text == nullptr || *text == '\0')
    return {{0.0, 1.0}};
  for (auto const& item : entries(text)) {
    size_t colon = item.find(':');
    if (colon == std::string::npos)
      throw std::invalid_argument("collbench platform: malformed factor entry '" + item + "'");
    out.emplace_back(std::stod(item.substr(0, colon)), std::stod(item.substr(colon + 1)));
  }
  return out;
}

double lookup(const Table& table, double size)
{
  double payload = size > ENVELOPE ? size - ENVELOPE : 0.0;
  double factor  = 1.0;
  for (auto const& [from, value] : table) {
    if (payload < from)
      break;
    factor = value;
  }
  return factor;
}

/* node and core index from "node<N>-c<K>"; false for any other name */
bool parse_host(const std::string& name, long& node, long& core)
{
  return std::sscanf(name.c_str(), "node%ld-c%ld", &node, &core) == 2;
}

int level_of(const Tables& t, const sg4::Host* src, const sg4::Host* dst)
{
  long sn = 0, sc = 0, dn = 0, dc = 0;
  if (src == nullptr || dst == nullptr) // SMPI may not know the peer yet (cost callbacks)
    return 0;
  if (not parse_host(src->get_name(), sn, sc) || not parse_host(dst->get_name(), dn, dc))
    return 2;
  if (sn != dn)
    return 2;
  long ss = sc / t.cores_per_socket, ds = dc / t.cores_per_socket;
  if (ss == ds)
    return 0;
  if (t.sockets_per_package > 0 && ss / t.sockets_per_package != ds / t.sockets_per_package)
    return 3;
  return 1;
}

/* "busy:seconds;..." (empty when absent) */
Table parse_load(const char* text)
{
  Table out;
  if (text == nullptr || *text == '\0')
    return out;
  for (auto const& item : entries(text)) {
    size_t colon = item.find(':');
    if (colon == std::string::npos)
      throw std::invalid_argument("collbench platform: malformed load entry '" + item + "'");
    out.emplace_back(std::stod(item.substr(0, colon)), std::stod(item.substr(colon + 1)));
  }
  return out;
}

/* extra seconds at `busy` cores: linear between entries, 0 below the first */
double load_at(const Table& t, double busy)
{
  if (t.empty() || busy < t.front().first)
    return 0.0;
  for (size_t i = 0; i + 1 < t.size(); i++)
    if (busy >= t[i].first && busy < t[i + 1].first)
      return t[i].second + (busy - t[i].first) / (t[i + 1].first - t[i].first) * (t[i + 1].second - t[i].second);
  return t.back().second;
}

/* "from_bytes:bytes_per_second" into a level's send queue (none when absent) */
void parse_queue(const char* text, double& from, double& bps)
{
  std::string s(text == nullptr ? "" : text);
  if (s.empty())
    return;
  size_t colon = s.find(':');
  if (colon == std::string::npos)
    throw std::invalid_argument("collbench platform: malformed send queue '" + s + "'");
  from = std::stod(s.substr(0, colon));
  bps  = std::stod(s.substr(colon + 1));
}

/* seconds a transfer of `size` bytes (envelope included) from `src` waits in its sender's
 * queue for `level` (0 without one, or below its threshold); books the queue's time */
double queued(Tables& t, int level, double size, const sg4::Host* src)
{
  double payload = size > ENVELOPE ? size - ENVELOPE : 0.0;
  double bps     = t.queue_bps[level];
  if (bps <= 0.0 || payload < t.queue_from[level] || src == nullptr)
    return 0.0;
  double now   = sg4::Engine::get_clock();
  double& free = t.queue_free[level == 2 ? 1 : 0][src];
  double start = std::max(now, free); // the earlier queued bytes have left
  free         = start + payload / bps;
  return start - now;
}

/* cores running an actor (a rank), per node */
std::vector<int> busy_cores()
{
  std::vector<int> out;
  for (auto const* host : sg4::Engine::get_instance()->get_all_hosts()) {
    long node = 0, core = 0;
    if (not parse_host(host->get_name(), node, core) || host->get_actor_count() == 0)
      continue;
    if (out.size() <= size_t(node))
      out.resize(node + 1, 0);
    out[node]++;
  }
  return out;
}

/* cores of `src`'s node that run a rank (0 for a host not named as collbench names them) */
double busy_at(Tables& t, const sg4::Host* src)
{
  long node = 0, core = 0;
  if (src == nullptr || not parse_host(src->get_name(), node, core))
    return 0.0;
  if (t.busy.empty())
    t.busy = busy_cores();
  return size_t(node) < t.busy.size() ? t.busy[node] : 0.0;
}

} // namespace

extern "C" void load_platform(const sg4::Engine& e);

void load_platform(const sg4::Engine& e)
{
  const char* xml = std::getenv("COLLBENCH_PLATFORM_XML");
  if (xml == nullptr)
    throw std::invalid_argument("collbench platform: COLLBENCH_PLATFORM_XML is not set");
  e.load_platform(xml);
  sg4::NetZone* zone = e.get_netzone_root();
  auto tables        = std::make_shared<Tables>();
  const char* cps    = zone->get_property("collbench/cores_per_socket");
  tables->cores_per_socket = cps ? std::max(1, std::atoi(cps)) : 1;
  const char* spp          = zone->get_property("collbench/sockets_per_package");
  tables->sockets_per_package = spp ? std::max(0, std::atoi(spp)) : 0;
  for (int i = 0; i < NLEVELS; i++) {
    tables->lat[i] = parse_table(zone->get_property(std::string("collbench/lat-factor/") + LEVELS[i]));
    tables->bw[i]  = parse_table(zone->get_property(std::string("collbench/bw-factor/") + LEVELS[i]));
  }
  bool load = false;
  for (int i = 0; i < NLEVELS; i++) {
    tables->load[i] = parse_load(zone->get_property(std::string("collbench/load-latency/") + LEVELS[i]));
    tables->slow[i] = parse_load(zone->get_property(std::string("collbench/load-slowdown/") + LEVELS[i]));
    load |= not tables->load[i].empty();
  }
  bool overheads = false;
  for (int i = 0; i < NLEVELS; i++) {
    tables->over[i] = parse_overheads(zone->get_property(std::string("collbench/overhead/") + LEVELS[i]));
    overheads |= not tables->over[i].empty();
    parse_queue(zone->get_property(std::string("collbench/send-queue/") + LEVELS[i]),
                tables->queue_from[i], tables->queue_bps[i]);
  }
  if (overheads) {
    auto send = [tables](size_t size, sg4::Host* src, sg4::Host* dst) {
      return overhead_at(tables->over[level_of(*tables, src, dst)], double(size)).first;
    };
    smpi_register_op_cost_callback(SmpiOperation::SEND, send);
    smpi_register_op_cost_callback(SmpiOperation::ISEND, send);
    smpi_register_op_cost_callback(SmpiOperation::RECV, [tables](size_t size, sg4::Host* src, sg4::Host* dst) {
      return overhead_at(tables->over[level_of(*tables, src, dst)], double(size)).second;
    });
  }
  auto* model = zone->get_network_model();
  model->set_lat_factor_cb([tables, load](double size, const sg4::Host* src, const sg4::Host* dst,
                                          const std::vector<sg4::Link*>& links,
                                          const std::unordered_set<sg4::NetZone*>&) {
    int level     = level_of(*tables, src, dst);
    double factor = lookup(tables->lat[level], size);
    double extra  = queued(*tables, level, size, src);
    if (load && not tables->load[level].empty())
      extra += load_at(tables->load[level], busy_at(*tables, src));
    if (extra <= 0.0)
      return factor;
    double route = 0.0;
    for (auto const* link : links)
      route += link->get_latency();
    return route > 0.0 ? factor + extra / route : factor;
  });
  model->set_bw_factor_cb([tables](double size, const sg4::Host* src, const sg4::Host* dst,
                                   const std::vector<sg4::Link*>&,
                                   const std::unordered_set<sg4::NetZone*>&) {
    int level     = level_of(*tables, src, dst);
    double factor = lookup(tables->bw[level], size);
    if (not tables->slow[level].empty()) {
      double slow = load_at(tables->slow[level], busy_at(*tables, src)); // 0 below its first entry
      if (slow > 1.0)
        factor /= slow; // the bytes take `slow` times longer under load
    }
    return factor;
  });
}
