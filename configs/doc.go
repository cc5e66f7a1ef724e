// Package configs is tollgate's typed configuration: one YAML file, decoded
// strictly, validated with errors that name the file, line, column and
// field, plus the example files in this folder (each is loaded by a test).
//
// It is data only: it imports no other tollgate package. Flags are a front
// for the same schema: code starts from Default (or Load), sets fields, and
// calls Validate.
//
// # Reading a file
//
// Parse decodes exactly one YAML document. Every field has a default, so an
// empty file (or one of only comments) is a valid configuration: one
// listener on 127.0.0.1:9092 in front of the built-in broker. A field the
// file leaves out, or sets to null ("key:" or "key: ~"), keeps its default;
// a listener or upstream section the file adds starts from that section's
// defaults. Unknown fields are errors (with a "did you mean" hint), as are
// duplicate keys and a second document after "---". Anchors, aliases and
// merge keys ("<<") work; top-level keys starting with "x-" are ignored so
// they can hold anchors. All problems are reported at once, each a
// *FieldError joined with errors.Join:
//
//	tollgate.yaml:7:20: limits.max_frame_bytes: "1k" has an ambiguous unit: write KiB/MiB/GiB (powers of 1024) or KB/MB/GB (powers of 1000)
//
// Sizes are written as bytes (1048576) or with a unit: B, KiB, MiB, GiB,
// TiB (1024-based), KB, MB, GB, TB (1000-based); "1.5GiB" is fine. Durations
// are Go durations ("250ms", "30s", "10m", "1h30m"); a plain number is
// rejected because its unit would be a guess.
//
// # Schema
//
//	listeners:                  # list; default: one listener as below
//	  - name: default           # first listener defaults to "default", others required; unique; [A-Za-z0-9._-], max 64
//	    listen: 127.0.0.1:9092  # bootstrap bind host:port; port 0 = kernel-chosen; empty host/0.0.0.0/:: = all interfaces
//	    advertise: ""           # host or host:port clients are told; default below
//	    brokers: port-per-broker  # or "sni" (edge.go) or "single-port" (single_port.go; virtual_node: the id clients see, default 0; fetch_ahead: ask brokers for a consumer's next records early, default true)
//	    broker_port_base: ~     # upstream node N is served at base+N (unused by the built-in broker, served at listen); default listen port + 1; 0 = kernel-chosen
//	    tls: ~                  # client-facing TLS: {cert, key, client_ca, min_version, ciphers, principal_from, principal_mapping_rules}; see security.go
//	    sasl: ~                 # SASL termination: {mechanisms, users_file, oauthbearer, max_reauth}; see security.go
//	upstream:                   # absent, or empty bootstrap: the built-in broker is the backend
//	  bootstrap: [host:9092]    # also "a:9092,b:9092" as one string
//	  tls:                      # present (even {}) = TLS to the brokers
//	    ca: ""                  # PEM bundle; empty = system roots
//	    cert: ""                # client certificate (mTLS); set with key
//	    key: ""
//	    server_name: ""         # name to verify; default the dialled host
//	    insecure_skip_verify: false   # not together with ca
//	  sasl: ~                   # {mechanism, username, password_file | token_file}, or passthrough; see security.go
//	  dial_timeout: 10s
//	  metadata_refresh: 30s     # how often the broker list is refreshed
//	  forward_unknown_apis: false  # relay keys/versions the gateway cannot decode (default: close)
//	broker:                     # the built-in broker (ignored with an upstream)
//	  data_dir: ./tollgate-data # relative to the working directory
//	  fsync: always             # always | interval | never
//	  fsync_interval: 50ms      # used by interval
//	  auto_create_topics: true
//	  defaults: {}              # topic config defaults by Kafka name, see TopicConfigNames
//	  cleaner_dedupe_buffer: 128MiB  # log cleaner key map bound (log.cleaner.dedupe.buffer.size); >= 1MiB
//	  cleaner_backoff: 15s      # how often the log cleaner looks for work (log.cleaner.backoff.ms)
//	  node_id: 0                # the broker's node id (node.id); 0 to 2^31-1
//	admin:
//	  listen: 127.0.0.1:9089    # /metrics /healthz /readyz; "off" disables
//	limits:
//	  max_frame_bytes: 100MiB   # 1 to 2^31-1
//	  max_preauth_frame_bytes: 512KiB  # <= max_frame_bytes
//	  max_request_bytes: 8MiB   # every API but Produce; capped at max_frame_bytes
//	  max_request_bytes_in_flight: 512MiB  # request bodies held across connections; raised to max_frame_bytes
//	  max_connections: 10000
//	  max_connections_per_address: 0    # 0 = no per-address cap
//	  max_in_flight: 100        # pipelined requests per connection
//	  socket_send_buffer_bytes: 0       # SO_SNDBUF of client connections (socket.send.buffer.bytes); 0 = kernel autotuning
//	  socket_unsent_bytes: 128KiB       # TCP_NOTSENT_LOWAT of client connections; 0 = no limit
//	  tcp_congestion_control: ""        # TCP_CONGESTION of client and upstream connections, e.g. cubic; "" = the host's
//	  idle_timeout: 10m         # like connections.max.idle.ms
//	  frame_timeout: 30s        # a started frame must finish; pushed forward on progress
//	  drain_timeout: 15s        # graceful shutdown bound
//	  connection_rate_per_address: 0    # new connections/s from one IP; 0 = no cap
//	  auth_failures_per_address: 10     # failed SASL logins within auth_lockout lock the IP out; 0 = never
//	  auth_lockout: 1m
//	  auth_timeout: 10s         # a SASL listener's connection must authenticate within this
//	log:
//	  level: info               # debug | info | warn | error
//	  format: text              # json | text
//	policy:                     # see policy.go and package policy
//	  default: allow            # allow | deny (ApiVersions, SASL and Metadata itself exempt)
//	  hide_denied_apis: []      # listeners whose ApiVersions omits keys denied outright
//	  acls: off                 # off | enforce | upstream; left out: off built-in, upstream in gateway mode (package acl)
//	  acls_file: <broker.data_dir>/acls.json   # the gateway's ACL store (enforce)
//	  super_users: []           # principals the ACLs do not apply to: ["User:admin"]
//	  allow_everyone_if_no_acl_found: false    # Kafka's allow.everyone.if.no.acl.found
//	  rules:                    # in order; first allow/deny that matches decides
//	    - name: rules[i]        # [A-Za-z0-9._-]; rate budgets survive reloads by name
//	      match:                # all set conditions must hold; {} matches everything
//	        listener: [name]    # listener names
//	        address: [10.0.0.0/8]   # CIDRs or IPs
//	        client_id: x        # string | [strings] (exact) | {exact, prefix, regex} (regex anchored)
//	        principal: x        # same shape; "" until authenticated
//	        api: [Produce, 19, admin]  # names (any case), numbers, groups: admin produce consume group transaction
//	        api_versions: {min: 0, max: 32767}
//	        topic: x            # same shape as client_id; topic_not excludes
//	        group: x
//	        transactional_id: x
//	      action: deny          # allow | deny; may be left out with rate (limit, then go on)
//	      rate:                 # token buckets; over budget = throttled (KIP-219), never refused
//	        requests_per_second: 0
//	        request_burst: 0    # default one second's worth
//	        produce_bytes_per_second: 0   # sizes: 5MiB
//	        produce_burst: 0
//	        fetch_bytes_per_second: 0     # not with topic/group/transactional_id/api_versions
//	        fetch_burst: 0
//	        burst: 0            # shorthand when only one rate is set
//	        per: client_id      # client_id | principal | address | shared
//
// # Derived values
//
// A listener's advertised host defaults to its listen host, or, when that
// is a wildcard, to the machine's hostname (what Kafka does for an
// advertised listener with no host): binding every interface means remote
// clients, and 127.0.0.1 would point them at themselves. Set advertise
// whenever clients reach the gateway by another name (NAT, DNS, a load
// balancer). A port in advertise replaces the bootstrap port clients are
// told; broker ports are advertised as bound. These values are computed
// when asked (AdvertisedHost, BrokerPortBaseOrDefault, BrokerPort), not
// stored, so that changing Listen after Load moves them too; YAML prints
// them resolved.
//
// # Checks across fields
//
// Validate refuses binds that can collide on the same or a wildcard host:
// listener bootstrap ports, broker port ranges and the admin port. With the
// built-in broker a listener's range is node 0 only; with an upstream it is
// assumed to be nodes 0 to AssumedNodeSpan-1 (node ids are not known before
// metadata arrives).
//
// # Adding a section
//
// A section that a later version adds can be listed in decode.go's notYet
// so that it is rejected with "not supported in this version" rather than
// a typo hint. A new section is a struct with yaml tags in config.go, defaults in
// Default (or setDefaults for list entries and optional sections), checks
// in validate.go, and a line in the schema above; the decoder needs no
// change, and its error positions come for free.
package configs
