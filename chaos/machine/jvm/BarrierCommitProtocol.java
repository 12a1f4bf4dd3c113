package streamchaos;

import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.JobContext;
import org.apache.spark.SparkEnv;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.internal.io.FileCommitProtocol.TaskCommitMessage;
import org.apache.spark.sql.execution.streaming.ManifestFileCommitProtocol;
import org.apache.spark.sql.execution.streaming.sinks.FileStreamSinkLog;
import scala.collection.immutable.Seq;

/**
 * The file sink's commit protocol with streamchaos phase barriers (spark.sql.streaming.commitProtocolClass).
 *
 * The file sink writes part files from the tasks, then (commitJob, on the driver) appends the batch's
 * entry to _spark_metadata/N, then Spark writes commits/N. No Python hook sees those steps, so this
 * class reports them to the harness's controller and waits for its answer, like the Python sinks do:
 * "sink-write" when every task's file is complete and the log entry is not yet written, "sink-done"
 * after the log entry. The controller's address comes from spark.streamchaos.controller. A job may run a file sink
 * beside the one under test (a bronze table its next query reads): only the sink at the query's session's
 * spark.streamchaos.fileSink.path reports, when that is set (a query's session is a copy of the job's made at its
 * start, so the job sets it before starting any).
 */
public class BarrierCommitProtocol extends ManifestFileCommitProtocol {
    private static final String TESTED = "spark.streamchaos.fileSink.path";
    private final String path;
    private long batch = -1L;

    public BarrierCommitProtocol(String jobId, String path) {
        super(jobId, path);
        this.path = path;
    }

    private boolean tested() {
        scala.Option<SparkSession> session = SparkSession.getActiveSession();
        String wanted = session.isDefined() ? session.get().conf().get(TESTED, "") : "";
        // The sink's path comes qualified (file:/...), the setting as the harness wrote it.
        return wanted.isEmpty() || new Path(wanted).toUri().getPath().equals(new Path(path).toUri().getPath());
    }

    @Override
    public void setupManifestOptions(FileStreamSinkLog fileLog, long batchId) {
        this.batch = batchId;
        super.setupManifestOptions(fileLog, batchId);
    }

    @Override
    public void commitJob(JobContext jobContext, Seq<TaskCommitMessage> taskCommits) {
        report("sink-write", "\"files\": " + taskCommits.size());
        super.commitJob(jobContext, taskCommits);
        report("sink-done", "\"log\": \"_spark_metadata/" + batch + "\"");
    }

    private void report(String phase, String detail) {
        if (!tested()) {
            return;
        }
        Barrier.report(SparkEnv.get().conf().get("spark.streamchaos.controller", ""),
                SparkEnv.get().conf().get("spark.streamchaos.incarnation", "0"), batch, phase, detail, "file-sink");
    }
}
