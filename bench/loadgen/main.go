// loadgen posts Spark progress events to an HTTP endpoint and reports throughput and
// latency as one JSON line. Standard library only.
//
// Queries are spread over workers so that one query's batches are posted in order (one
// worker owns a query): the service sees what Spark sends, each batch id once and rising.
//
// -rate 0 is closed-loop (each worker posts as fast as answers come: the sustained
// maximum); -rate R is open-loop (events scheduled at R per second, latency counted
// from the scheduled time, so a stall is not hidden by the generator waiting for it).
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type result struct {
	URL         string  `json:"url"`
	Mode        string  `json:"mode"`
	Seconds     float64 `json:"seconds"`
	Sent        int64   `json:"sent"`
	OK          int64   `json:"ok"`
	Non2xx      int64   `json:"non_2xx"`
	Errors      int64   `json:"errors"`
	Rate        float64 `json:"events_per_second"`
	P50ms       float64 `json:"p50_ms"`
	P99ms       float64 `json:"p99_ms"`
	Maxms       float64 `json:"max_ms"`
	FirstStatus string  `json:"first_failure,omitempty"`
}

type config struct {
	url        string
	urls       []string // url split on commas: requests go round robin, like a Service
	next       atomic.Uint64
	token      string
	queries    int
	partitions int
	topic      string
	topics     int // > 1: query q reads topic "<topic>-<q mod topics>"
	rate       float64
	workers    int
	seconds    float64
	firstBatch int
	perQuery   int
}

func topicOf(cfg *config, query int) string {
	if cfg.topics > 1 {
		return cfg.topic + "-" + strconv.Itoa(query%cfg.topics)
	}
	return cfg.topic
}

func body(cfg *config, query, batch int) []byte {
	offsets := make(map[string]int, cfg.partitions)
	for p := 0; p < cfg.partitions; p++ {
		offsets[strconv.Itoa(p)] = batch*10 + p
	}
	topic := topicOf(cfg, query)
	end := map[string]map[string]int{topic: offsets}
	event := map[string]any{
		"group_id": fmt.Sprintf("bench-group-%d", query),
		"progress": map[string]any{
			"id":           fmt.Sprintf("bench-query-%d", query),
			"runId":        "bench-run",
			"name":         "bench",
			"timestamp":    "2026-11-21T12:00:00.000Z",
			"batchId":      batch,
			"numInputRows": 10,
			"sources": []any{map[string]any{
				"description":  "KafkaV2[Subscribe[" + topic + "]]",
				"startOffset":  end,
				"endOffset":    end,
				"latestOffset": end,
				"numInputRows": 10,
			}},
			"sink": map[string]any{"description": "ForeachBatchSink", "numOutputRows": -1},
		},
	}
	data, _ := json.Marshal(event)
	return data
}

type recorder struct {
	mu        sync.Mutex
	latencies []time.Duration
	ok        int64
	non2xx    int64
	errors    int64
	first     string
}

func (r *recorder) add(latency time.Duration, status int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.latencies = append(r.latencies, latency)
	switch {
	case err != nil:
		r.errors++
		if r.first == "" {
			r.first = err.Error()
		}
	case status/100 == 2:
		r.ok++
	default:
		r.non2xx++
		if r.first == "" {
			r.first = "HTTP " + strconv.Itoa(status)
		}
	}
}

func post(client *http.Client, cfg *config, data []byte) (int, error) {
	target := cfg.urls[cfg.next.Add(1)%uint64(len(cfg.urls))]
	req, _ := http.NewRequest("POST", target, bytes.NewReader(data))
	req.Header.Set("content-type", "application/json")
	if cfg.token != "" {
		req.Header.Set("authorization", "Bearer "+cfg.token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func main() {
	cfg := &config{}
	flag.StringVar(&cfg.url, "url", "http://127.0.0.1:8000/v1/progress", "endpoint(s), comma-separated")
	flag.StringVar(&cfg.token, "token", "", "bearer token")
	flag.IntVar(&cfg.queries, "queries", 100, "distinct queries (one group each)")
	flag.IntVar(&cfg.partitions, "partitions", 8, "partitions per event")
	flag.StringVar(&cfg.topic, "topic", "bench", "topic named in the events")
	flag.IntVar(&cfg.topics, "topics", 1, "topics the queries read, in turn (bench-0, bench-1, ...)")
	flag.Float64Var(&cfg.rate, "rate", 0, "events per second; 0 = as fast as answered")
	flag.IntVar(&cfg.workers, "workers", 32, "concurrent connections")
	flag.Float64Var(&cfg.seconds, "seconds", 10, "duration")
	flag.IntVar(&cfg.firstBatch, "first-batch", 0, "first batch id (a later run continues)")
	flag.IntVar(&cfg.perQuery, "per-query", 0, "stop after this many events per query (0: run -seconds)")
	flag.Parse()
	cfg.urls = strings.Split(cfg.url, ",")
	if cfg.workers > cfg.queries {
		cfg.workers = cfg.queries
	}

	transport := &http.Transport{
		MaxIdleConnsPerHost: cfg.workers,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	}
	client := &http.Client{Transport: transport, Timeout: 30 * time.Second}
	rec := &recorder{latencies: make([]time.Duration, 0, 1<<20)}
	var sent atomic.Int64
	start := time.Now()
	deadline := start.Add(time.Duration(cfg.seconds * float64(time.Second)))

	// Each worker owns queries w, w+workers, ... and cycles through them.
	var ticks chan time.Time
	if cfg.rate > 0 {
		ticks = make(chan time.Time, 1<<16)
		go func() {
			interval := time.Duration(float64(time.Second) / cfg.rate)
			for n := 0; ; n++ {
				at := start.Add(time.Duration(n) * interval)
				if at.After(deadline) {
					close(ticks)
					return
				}
				time.Sleep(time.Until(at))
				ticks <- at
			}
		}()
	}
	var wg sync.WaitGroup
	for w := 0; w < cfg.workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			batch := map[int]int{}
			owned := (cfg.queries - w + cfg.workers - 1) / cfg.workers
			for i := 0; ; i++ {
				if cfg.perQuery > 0 && i >= owned*cfg.perQuery {
					return
				}
				query := w + (i%owned)*cfg.workers
				b, ok := batch[query]
				if !ok {
					b = cfg.firstBatch
				}
				batch[query] = b + 1
				data := body(cfg, query, b)
				var scheduled time.Time
				if ticks != nil {
					at, open := <-ticks
					if !open {
						return
					}
					scheduled = at
				} else {
					scheduled = time.Now()
					if scheduled.After(deadline) {
						return
					}
				}
				sent.Add(1)
				status, err := post(client, cfg, data)
				rec.add(time.Since(scheduled), status, err)
			}
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()

	sort.Slice(rec.latencies, func(i, j int) bool { return rec.latencies[i] < rec.latencies[j] })
	pick := func(q float64) float64 {
		if len(rec.latencies) == 0 {
			return 0
		}
		i := int(q * float64(len(rec.latencies)))
		if i >= len(rec.latencies) {
			i = len(rec.latencies) - 1
		}
		return float64(rec.latencies[i].Microseconds()) / 1000
	}
	mode := "closed-loop"
	if cfg.rate > 0 {
		mode = fmt.Sprintf("open-loop %.0f/s", cfg.rate)
	}
	out := result{
		URL: cfg.url, Mode: mode, Seconds: elapsed, Sent: sent.Load(), OK: rec.ok,
		Non2xx: rec.non2xx, Errors: rec.errors, Rate: float64(rec.ok) / elapsed,
		P50ms: pick(0.5), P99ms: pick(0.99), Maxms: pick(1.0), FirstStatus: rec.first,
	}
	enc := json.NewEncoder(os.Stdout)
	_ = enc.Encode(out)
}
