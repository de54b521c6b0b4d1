/*
 * Debezium Embedded runner for medallion's tests: runs one connector with Kafka Connect's
 * JsonConverter and appends every record to a JSON-lines file in medallion's kafka_json format.
 *
 * usage: java -cp <classes>:<lib>/* medallion.debezium.Runner ENGINE.properties OUTPUT.jsonl
 *
 * ENGINE.properties holds everything DebeziumEngine is given (name, connector.class, offset
 * storage, connector properties, converter.* settings); docs/debezium-embedded.md lists what the
 * tests use. Every record becomes one line
 *
 *   {"topic":"<destination>","key":<key JSON or null>,"value":<value JSON or null>,
 *    "headers":[{"key":"<name>","value":"<header JSON text>"},...]}
 *
 * where key and value are JsonConverter's output verbatim (with converter.schemas.enable=true a
 * {"schema":..,"payload":..} pair) and header values are JsonConverter's output as text. Each
 * batch is written and flushed before its records are marked processed, so an offset is only
 * committed for records that are in the file. SIGTERM closes the engine (which commits the
 * offsets of everything marked processed), waits for it to stop, then closes the file; a second
 * start with the same offset file resumes after the last committed record.
 *
 * The same source compiles against Debezium 3.4 (MariaDB) and 3.6 (PostgreSQL): it uses only
 * the io.debezium.engine API, which both share.
 */
package medallion.debezium;

import io.debezium.engine.ChangeEvent;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.Header;
import io.debezium.engine.format.Json;
import io.debezium.engine.format.KeyValueHeaderChangeEventFormat;

import java.io.BufferedOutputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Instant;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

public final class Runner {

    /** How long SIGTERM waits for the engine to stop and commit its offsets. */
    private static final long STOP_TIMEOUT_SECONDS = 60;

    private Runner() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: medallion.debezium.Runner ENGINE.properties OUTPUT.jsonl");
            System.exit(2);
        }
        Properties props = new Properties();
        try (InputStream in = Files.newInputStream(Paths.get(args[0]))) {
            props.load(in);
        }
        Path outputPath = Paths.get(args[1]);
        OutputStream out = new BufferedOutputStream(new FileOutputStream(outputPath.toFile(), true), 1 << 16);
        AtomicLong written = new AtomicLong();
        AtomicBoolean stopping = new AtomicBoolean(false);
        AtomicReference<String> failure = new AtomicReference<>();
        CountDownLatch done = new CountDownLatch(1);

        DebeziumEngine.ChangeConsumer<ChangeEvent<String, String>> consumer = (records, committer) -> {
            try {
                for (ChangeEvent<String, String> record : records) {
                    out.write(line(record));
                }
                out.flush();
            }
            catch (IOException e) {
                throw new IllegalStateException("cannot write " + outputPath + ": " + e, e);
            }
            for (ChangeEvent<String, String> record : records) {
                committer.markProcessed(record);
            }
            committer.markBatchFinished();
            long total = written.addAndGet(records.size());
            log("batch of " + records.size() + " record(s) written, " + total + " in all");
        };

        DebeziumEngine<ChangeEvent<String, String>> engine = DebeziumEngine
                .create(KeyValueHeaderChangeEventFormat.of(Json.class, Json.class, Json.class))
                .using(props)
                .using(new DebeziumEngine.ConnectorCallback() {
                    @Override
                    public void taskStarted() {
                        log("task started");
                    }

                    @Override
                    public void taskStopped() {
                        log("task stopped");
                    }
                })
                .using((success, message, error) -> {
                    if (!success) {
                        failure.set(message + (error == null ? "" : ": " + error));
                    }
                    log("engine finished: success=" + success + " " + message
                            + (error == null ? "" : " (" + error + ")"));
                    done.countDown();
                })
                .notifying(consumer)
                .build();

        ExecutorService executor = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "debezium-engine");
            t.setDaemon(true);
            return t;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stopping.set(true);
            log("stopping (signal): closing the engine");
            try {
                engine.close();
                if (!done.await(STOP_TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
                    log("the engine did not stop within " + STOP_TIMEOUT_SECONDS + " s");
                }
            }
            catch (Exception e) {
                log("closing the engine failed: " + e);
            }
            closeQuietly(out);
            log("stopped; " + written.get() + " record(s) written");
        }, "medallion-stop"));

        log("starting " + props.getProperty("connector.class") + " -> " + outputPath);
        executor.execute(engine);
        done.await();
        if (stopping.get()) {
            return; // the shutdown hook owns the rest
        }
        closeQuietly(out);
        String failed = failure.get();
        if (failed != null) {
            log("FAILED: " + failed);
            System.exit(1);
        }
        System.exit(0);
    }

    /** One output line: the kafka_json wrapper around JsonConverter's key, value and headers. */
    static byte[] line(ChangeEvent<String, String> record) {
        StringBuilder sb = new StringBuilder(512);
        sb.append("{\"topic\":");
        quote(sb, record.destination());
        sb.append(",\"key\":").append(record.key() == null ? "null" : record.key());
        sb.append(",\"value\":").append(record.value() == null ? "null" : record.value());
        sb.append(",\"headers\":[");
        List<Header<String>> headers = record.headers();
        if (headers != null) {
            boolean first = true;
            for (Header<String> h : headers) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                sb.append("{\"key\":");
                quote(sb, h.getKey());
                sb.append(",\"value\":");
                quote(sb, h.getValue());
                sb.append('}');
            }
        }
        sb.append("]}\n");
        return sb.toString().getBytes(StandardCharsets.UTF_8);
    }

    /** Appends {@code s} as a JSON string (null as JSON null). */
    static void quote(StringBuilder sb, String s) {
        if (s == null) {
            sb.append("null");
            return;
        }
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"':
                    sb.append("\\\"");
                    break;
                case '\\':
                    sb.append("\\\\");
                    break;
                case '\n':
                    sb.append("\\n");
                    break;
                case '\r':
                    sb.append("\\r");
                    break;
                case '\t':
                    sb.append("\\t");
                    break;
                default:
                    if (c < 0x20) {
                        sb.append(String.format("\\u%04x", (int) c));
                    }
                    else {
                        sb.append(c);
                    }
            }
        }
        sb.append('"');
    }

    private static void closeQuietly(OutputStream out) {
        try {
            out.close();
        }
        catch (IOException e) {
            log("closing the output failed: " + e);
        }
    }

    private static void log(String message) {
        System.err.println(Instant.now() + " [medallion-runner] " + message);
        System.err.flush();
    }
}
