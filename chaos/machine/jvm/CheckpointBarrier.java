package streamchaos;

// requires: org/apache/spark/sql/execution/streaming/checkpointing/CheckpointFileManager.class

import java.io.IOException;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.PathFilter;
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager;

/**
 * Phase barriers at the query's own checkpoint files (spark.sql.streaming.checkpointFileManagerClass), for
 * sources and sinks of Spark's own where no Python code runs (Spark's Kafka source and sink).
 *
 * Every micro-batch writes offsets/N before any of its tasks runs and commits/N once its sink returned. Those
 * two writes go through this file manager (it hands every other file to Spark's default one unchanged), so it
 * reports "planned" when offsets/N is complete and "sink-done" when commits/N is about to be written (the sink's
 * addBatch returned: Kafka's producers flushed), each waiting for the harness like the Python hooks do.
 * Which of the two it reports, to which controller, for which checkpoint: the session's settings
 * spark.streamchaos.checkpoint.{phases,controller,incarnation,root}, copied into Hadoop's configuration.
 */
public class CheckpointBarrier implements CheckpointFileManager {
    public static final String KEY = "spark.sql.streaming.checkpointFileManagerClass";
    private static final String PREFIX = "spark.streamchaos.checkpoint.";

    private final CheckpointFileManager inner;
    private final String controller;
    private final String incarnation;
    private final String phases;
    private final String root;

    public CheckpointBarrier(Path path, Configuration conf) {
        Configuration plain = new Configuration(conf);
        plain.unset(KEY);
        this.inner = CheckpointFileManager.create(path, plain);
        this.controller = conf.get(PREFIX + "controller", "");
        this.incarnation = conf.get(PREFIX + "incarnation", "0");
        this.phases = "," + conf.get(PREFIX + "phases", "") + ",";
        this.root = conf.get(PREFIX + "root", "");
    }

    /** The batch a file of ``log`` (offsets, commits) under the trial's checkpoint is for, or -1. */
    private long batchOf(Path path, String log) {
        Path parent = path.getParent();
        String name = path.getName();
        if (parent == null || !parent.getName().equals(log) || !name.matches("\\d+")) {
            return -1L;
        }
        String where = path.toUri().getPath();
        // Under the trial's checkpoint itself, not a side query's beside it (checkpoint-NAME shares the prefix).
        String under = root.endsWith("/") ? root : root + "/";
        return root.isEmpty() || where.startsWith(under) ? Long.parseLong(name) : -1L;
    }

    private void report(long batch, String phase, String detail) {
        if (batch >= 0 && phases.contains("," + phase + ",")) {
            Barrier.report(controller, incarnation, batch, phase, detail, "checkpoint");
        }
    }

    @Override
    public CancellableFSDataOutputStream createAtomic(Path path, boolean overwriteIfPossible) {
        long committing = batchOf(path, "commits");
        report(committing, "sink-done", "\"before\": \"commits/" + committing + "\"");
        CancellableFSDataOutputStream out = inner.createAtomic(path, overwriteIfPossible);
        long planning = batchOf(path, "offsets");
        return planning < 0 ? out : new Planned(out, planning);
    }

    /** offsets/N: "planned" once the file is complete (closed, renamed into place), before the batch runs. */
    private final class Planned extends CancellableFSDataOutputStream {
        private final CancellableFSDataOutputStream out;
        private final long batch;
        private boolean closed;

        Planned(CancellableFSDataOutputStream out, long batch) {
            super(out);
            this.out = out;
            this.batch = batch;
        }

        @Override
        public void cancel() {
            closed = true;
            out.cancel();
        }

        @Override
        public void close() throws IOException {
            if (closed) {
                return;
            }
            closed = true;
            super.close();
            report(batch, "planned", "\"after\": \"offsets/" + batch + "\"");
        }
    }

    @Override
    public FSDataInputStream open(Path path) {
        return inner.open(path);
    }

    @Override
    public FileStatus[] list(Path path, PathFilter filter) {
        return inner.list(path, filter);
    }

    @Override
    public void mkdirs(Path path) {
        inner.mkdirs(path);
    }

    @Override
    public boolean exists(Path path) {
        return inner.exists(path);
    }

    @Override
    public void delete(Path path) {
        inner.delete(path);
    }

    @Override
    public boolean isLocal() {
        return inner.isLocal();
    }

    @Override
    public Path createCheckpointDirectory() {
        return inner.createCheckpointDirectory();
    }

    @Override
    public void close() {
        inner.close();
    }
}
