package streamchaos;

import org.apache.hadoop.mapreduce.JobContext;
import org.apache.spark.SparkEnv;
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
 * after the log entry. The controller's address comes from spark.streamchaos.controller.
 */
public class BarrierCommitProtocol extends ManifestFileCommitProtocol {
    private long batch = -1L;

    public BarrierCommitProtocol(String jobId, String path) {
        super(jobId, path);
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
        Barrier.report(SparkEnv.get().conf().get("spark.streamchaos.controller", ""),
                SparkEnv.get().conf().get("spark.streamchaos.incarnation", "0"), batch, phase, detail, "file-sink");
    }
}
